//! Band join with asymmetric time bounds (`l.ts + lower <= r.ts <= l.ts + upper`) and the left outer join:
//! the reference against an independent brute force (rows *and* order), and every engine against the
//! reference, push by push, for any thread count, batch split and disorder within the lateness bound.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{Array, Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use proptest::prelude::*;
use windgate_core::ErrorKind;
use windgate_core::aggregate::{LatenessOpt, Span};
use windgate_core::join::{
    BandJoinOptions, BandJoiner, JoinHow, JoinStrategy, Predicate, Semantics, Side, band_join,
};

/// A row: (ts, band value (nullable), equality key). Its index travels in the `id` column.
type Row = (i64, Option<i64>, i64);

fn batch(rows: &[(usize, Row)]) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("ts", DataType::Int64, false),
        Field::new("x", DataType::Int64, true),
        Field::new("k", DataType::Int64, false),
        Field::new("id", DataType::Int64, false),
    ]));
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1.0))),
            Arc::new(Int64Array::from_iter(rows.iter().map(|r| r.1.1))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1.2))),
            Arc::new(Int64Array::from_iter_values(
                rows.iter().map(|r| r.0 as i64),
            )),
        ],
    )
    .unwrap()
}

fn on(eps: Option<f64>, eq: bool) -> Vec<Predicate> {
    let mut on = vec![];
    if let Some(eps) = eps {
        on.push(Predicate::Band {
            left: "x".into(),
            right: "x".into(),
            eps,
        });
    }
    if eq {
        on.push(Predicate::Eq {
            left: "k".into(),
            right: "k".into(),
        });
    }
    on
}

fn opts(lower: i64, upper: i64, on: Vec<Predicate>, how: JoinHow) -> BandJoinOptions {
    let mut o = BandJoinOptions::between(
        ("ts".into(), "ts".into()),
        Span::Units(lower),
        Span::Units(upper),
        on,
    );
    o.how = how;
    o
}

/// `(left id, right id or None)` of every output row, in order.
fn ids(batches: &[RecordBatch]) -> Vec<(i64, Option<i64>)> {
    let mut out = vec![];
    for b in batches.iter().filter(|b| b.num_rows() > 0) {
        let l = b
            .column_by_name("left_id")
            .unwrap()
            .as_primitive::<Int64Type>();
        let r = b
            .column_by_name("right_id")
            .unwrap()
            .as_primitive::<Int64Type>();
        out.extend((0..b.num_rows()).map(|i| (l.value(i), r.is_valid(i).then(|| r.value(i)))));
    }
    out
}

/// The documented output, computed without windows: the merged order `(ts, left before right, arrival)`;
/// for each tuple, first the unmatched left rows it closes (`l.ts + upper < t.ts`, in merged order), then
/// its pairs with the earlier tuples of the other side, in merged order; at the end the left rows still
/// open.
fn brute(
    left: &[Row],
    right: &[Row],
    (lower, upper): (i64, i64),
    eps: Option<f64>,
    eq: bool,
    outer: bool,
) -> Vec<(i64, Option<i64>)> {
    let mut merged: Vec<(i64, usize, usize)> =
        left.iter().enumerate().map(|(i, r)| (r.0, 0, i)).collect();
    merged.extend(right.iter().enumerate().map(|(i, r)| (r.0, 1, i)));
    merged.sort();
    let holds = |l: &Row, r: &Row| {
        let d = r.0 as i128 - l.0 as i128;
        let band = match eps {
            None => true,
            Some(e) => matches!((l.1, r.1), (Some(x), Some(a)) if ((x - a) as f64).abs() <= e),
        };
        lower as i128 <= d && d <= upper as i128 && band && (!eq || l.2 == r.2)
    };
    let mut out = vec![];
    let mut matched = vec![false; left.len()];
    let mut open: Vec<usize> = vec![];
    for (p, &(ts, side, idx)) in merged.iter().enumerate() {
        if outer {
            open.retain(|&li| {
                let closed = (left[li].0 as i128 + upper as i128) < ts as i128;
                if closed && !matched[li] {
                    out.push((li as i64, None));
                }
                !closed
            });
        }
        for &(_, s2, j) in &merged[..p] {
            if s2 == side {
                continue;
            }
            let (li, ri) = if side == 0 { (idx, j) } else { (j, idx) };
            if holds(&left[li], &right[ri]) {
                matched[li] = true;
                out.push((li as i64, Some(ri as i64)));
            }
        }
        if side == 0 {
            open.push(idx);
        }
    }
    if outer {
        out.extend(
            open.iter()
                .filter(|&&li| !matched[li])
                .map(|&li| (li as i64, None)),
        );
    }
    out
}

fn row() -> impl Strategy<Value = Row> {
    (
        -10i64..50,
        proptest::option::weighted(0.9, 0i64..6),
        0i64..3,
    )
}

fn bounds() -> impl Strategy<Value = (i64, i64)> {
    (-12i64..12, 0i64..12).prop_map(|(lo, len)| (lo, lo + len))
}

fn run_batch(left: &[Row], right: &[Row], o: BandJoinOptions) -> Vec<RecordBatch> {
    let tag = |rows: &[Row]| rows.iter().copied().enumerate().collect::<Vec<_>>();
    let (l, r) = (batch(&tag(left)), batch(&tag(right)));
    band_join(
        (l.schema(), vec![Ok(l)]),
        (r.schema(), vec![Ok(r)]),
        o,
        || Ok(()),
    )
    .unwrap()
    .1
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, failure_persistence: None, ..ProptestConfig::default() })]

    /// The reference's rows and order are the brute force's, inner and left outer, any bounds.
    #[test]
    fn reference_matches_brute_force(
        left in proptest::collection::vec(row(), 0..30),
        right in proptest::collection::vec(row(), 0..30),
        (lower, upper) in bounds(),
        eps in proptest::option::of(0u8..3), eq: bool, outer: bool,
    ) {
        let eps = eps.map(f64::from);
        let how = if outer { JoinHow::Left } else { JoinHow::Inner };
        let mut o = opts(lower, upper, on(eps, eq), how);
        o.strategy = JoinStrategy::Reference;
        let got = ids(&run_batch(&left, &right, o));
        prop_assert_eq!(got, brute(&left, &right, (lower, upper), eps, eq, outer));
    }
}

/// Pushes of `(side, rows with their index)` in arrival order.
type Pushes = Vec<(Side, Vec<(usize, Row)>)>;

/// Rows moved by at most `k` from time order, split into pushes interleaving the two sides.
fn pushes(
    left: Vec<Row>,
    right: Vec<Row>,
    delays: &[u8],
    k: i64,
    splits: &[(bool, usize)],
) -> Pushes {
    let disorder = |rows: Vec<Row>| -> Vec<(usize, Row)> {
        let mut keyed: Vec<(i64, usize, Row)> = rows
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
        keyed.into_iter().map(|x| (x.1, x.2)).collect()
    };
    let sorted = |mut rows: Vec<Row>| {
        rows.sort_by_key(|r| r.0);
        disorder(rows)
    };
    let (l, r) = (sorted(left), sorted(right));
    let mut out = vec![];
    let (mut li, mut ri) = (0, 0);
    for &(left_side, n) in splits.iter().cycle().take(200) {
        let (side, rows, i) = if left_side {
            (Side::Left, &l, &mut li)
        } else {
            (Side::Right, &r, &mut ri)
        };
        if *i < rows.len() {
            let end = (*i + n).min(rows.len());
            out.push((side, rows[*i..end].to_vec()));
            *i = end;
        }
    }
    if li < l.len() {
        out.push((Side::Left, l[li..].to_vec()));
    }
    if ri < r.len() {
        out.push((Side::Right, r[ri..].to_vec()));
    }
    out
}

fn stream(pushes: &Pushes, o: BandJoinOptions) -> Vec<RecordBatch> {
    let mut j = BandJoiner::new(o).unwrap();
    let mut outs: Vec<RecordBatch> = pushes
        .iter()
        .map(|(side, rows)| j.push(&batch(rows), *side).unwrap())
        .collect();
    outs.push(j.flush().unwrap());
    outs
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, failure_persistence: None, ..ProptestConfig::default() })]

    /// Every engine returns the reference's rows in the same order, push by push: asymmetric bounds, inner
    /// and left outer, any thread count, split and disorder within the lateness bound.
    #[test]
    fn every_engine_equals_the_reference(
        left in proptest::collection::vec(row(), 0..50),
        right in proptest::collection::vec(row(), 0..50),
        delays in proptest::collection::vec(any::<u8>(), 50),
        splits in proptest::collection::vec((any::<bool>(), 1usize..10), 1..10),
        (lower, upper) in bounds(),
        eps in proptest::option::of(0u8..3), eq: bool, outer: bool,
        lateness in prop_oneof![1 => Just(None), 3 => (0i64..4).prop_map(Some)],
        threads in 1usize..6,
    ) {
        let k = lateness.unwrap_or(30);
        let pushes = pushes(left, right, &delays, k, &splits);
        let how = if outer { JoinHow::Left } else { JoinHow::Inner };
        let mut base = opts(lower, upper, on(eps.map(f64::from), eq), how);
        base.lateness = lateness.map_or(LatenessOpt::Exact, |k| LatenessOpt::Bound(Span::Units(k)));
        let mut reference = base.clone();
        reference.strategy = JoinStrategy::Reference;
        let want = stream(&pushes, reference);
        for index in [true, false] {
            let mut o = base.clone();
            o.index = index;
            o.strategy = JoinStrategy::Serial;
            prop_assert_eq!(&stream(&pushes, o.clone()), &want, "serial index={}", index);
            o.strategy = JoinStrategy::ScaleJoin;
            o.threads = Some(threads);
            prop_assert_eq!(&stream(&pushes, o), &want, "scalejoin x{} index={}", threads, index);
        }
    }

    /// `window = w` is `lower = -w, upper = w`; left outer with ScaleJoin's own semantics agrees across
    /// engines too.
    #[test]
    fn window_is_symmetric_bounds_and_scalejoin_outer_agrees(
        left in proptest::collection::vec(row(), 0..40),
        right in proptest::collection::vec(row(), 0..40),
        w in 0i64..10, outer: bool, scalejoin: bool, threads in 1usize..5,
    ) {
        let how = if outer { JoinHow::Left } else { JoinHow::Inner };
        let sem = if scalejoin { Semantics::ScaleJoin } else { Semantics::Interval };
        let mut a = BandJoinOptions::new(("ts".into(), "ts".into()), Span::Units(w), on(Some(1.0), false));
        a.how = how;
        a.semantics = sem;
        let mut b = opts(-w, w, on(Some(1.0), false), how);
        b.semantics = sem;
        b.strategy = JoinStrategy::Reference;
        let want = run_batch(&left, &right, b);
        prop_assert_eq!(&run_batch(&left, &right, a.clone()), &want);
        a.strategy = JoinStrategy::ScaleJoin;
        a.threads = Some(threads);
        prop_assert_eq!(&run_batch(&left, &right, a), &want);
    }
}

/// Impressions up to 30 before the click (lower=-30, upper=0): the left row at 100 meets right rows at
/// 70..=100 only; a left row with no partner comes out once, with null right columns, when the stream
/// passes `l.ts + upper`, before the pairs of the tuple that passed it.
#[test]
fn impressions_before_the_click_and_unmatched_rows() {
    let left = [(100, Some(0), 0), (200, Some(0), 0)];
    let right = [
        (69, Some(0), 0),
        (70, Some(0), 0),
        (100, Some(0), 0),
        (101, Some(0), 0),
    ];
    for strategy in [
        JoinStrategy::Reference,
        JoinStrategy::Serial,
        JoinStrategy::ScaleJoin,
    ] {
        let mut o = opts(-30, 0, vec![], JoinHow::Left);
        o.strategy = strategy;
        o.threads = Some(3);
        let out = run_batch(&left, &right, o);
        assert_eq!(
            ids(&out),
            vec![(0, Some(1)), (0, Some(2)), (1, None)],
            "{strategy:?}"
        );
        let schema = out[0].schema();
        assert!(schema.field_with_name("right_ts").unwrap().is_nullable());
        let ts: Vec<i64> = out
            .iter()
            .flat_map(|b| {
                b.column_by_name("ts")
                    .unwrap()
                    .as_primitive::<Int64Type>()
                    .values()
                    .to_vec()
            })
            .collect();
        assert_eq!(ts, vec![100, 100, 200]);
    }
    // Streaming: the unmatched left row 0 goes out as soon as the right side passes 100 + 0.
    let mut o = opts(-30, 0, vec![], JoinHow::Left);
    o.lateness = LatenessOpt::Bound(Span::Units(0));
    let mut j = BandJoiner::new(o).unwrap();
    assert_eq!(
        j.push(&batch(&[(0, (100, None, 0))]), Side::Left)
            .unwrap()
            .num_rows(),
        0
    );
    let right = batch(&[(0, (105, None, 0)), (1, (107, None, 0))]);
    assert_eq!(ids(&[j.push(&right, Side::Right).unwrap()]), vec![]);
    // Left 106 moves the left watermark past 100 and 105: left 100 and right 105 become ready, and right
    // 105 closes left 100 (100 + 0 < 105) unmatched.
    let out = j.push(&batch(&[(1, (106, None, 0))]), Side::Left).unwrap();
    assert_eq!(ids(&[out]), vec![(0, None)]);
    // Left 106 meets right 105 (105 - 106 in [-30, 0]).
    assert_eq!(ids(&[j.flush().unwrap()]), vec![(1, Some(0))]);
    assert_eq!(j.stats().unmatched_rows, 1);
    assert_eq!(j.stats().pairs_out, 1);
}

#[test]
fn bad_bounds_are_named() {
    let err = |o: BandJoinOptions| BandJoiner::new(o).err().expect("rejected");
    let e = err(opts(5, 4, vec![], JoinHow::Inner));
    assert!(
        e.kind() == ErrorKind::InvalidParameter && e.message().starts_with("lower"),
        "{e}"
    );
    let mut o = opts(-5, 5, vec![], JoinHow::Inner);
    o.window = Some(Span::Units(3));
    assert!(err(o).message().starts_with("window"));
    let mut o = opts(-5, 5, vec![], JoinHow::Inner);
    o.upper = None;
    assert!(err(o).message().starts_with("upper"));
    let mut o = opts(-5, 4, vec![], JoinHow::Inner);
    o.semantics = Semantics::ScaleJoin;
    assert!(err(o).message().starts_with("semantics"));
    let mut o = opts(-5, 5, vec![], JoinHow::Inner);
    o.semantics = Semantics::ScaleJoin;
    assert!(BandJoiner::new(o).is_ok());
    let e = err(BandJoinOptions::between(
        ("ts".into(), "ts".into()),
        Span::Text("-1s".into()),
        Span::Text("-2s".into()),
        vec![],
    ));
    assert!(e.message().starts_with("lower"), "{e}");
    let e = err(BandJoinOptions::between(
        ("ts".into(), "ts".into()),
        Span::Text("-x".into()),
        Span::Text("2s".into()),
        vec![],
    ));
    assert!(e.message().starts_with("lower"), "{e}");
}

/// Retention follows the bounds: with `upper = 0` a left row is dropped as soon as time passes it, while
/// right rows are kept for `-lower`.
#[test]
fn retention_follows_the_bounds() {
    let mut o = opts(-1000, 0, vec![], JoinHow::Left);
    o.lateness = LatenessOpt::Bound(Span::Units(0));
    o.strategy = JoinStrategy::Serial;
    let mut j = BandJoiner::new(o).unwrap();
    for t in 0..50i64 {
        let rows: Vec<(usize, Row)> = (0..100)
            .map(|i| (i, (t * 100 + i as i64, None, 0)))
            .collect();
        j.push(&batch(&rows), Side::Left).unwrap();
        j.push(&batch(&rows), Side::Right).unwrap();
    }
    let s = j.stats();
    // Left: the last batch or so; right: about 1000 time units (10 batches) of rows.
    assert!(s.retained_rows[0] <= 200, "{:?}", s.retained_rows);
    assert!(
        s.retained_rows[1] <= 1200 && s.retained_rows[1] >= 1000,
        "{:?}",
        s.retained_rows
    );
}
