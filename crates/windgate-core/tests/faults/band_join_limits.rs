//! Band join limits: parameter bounds, credits (a side that runs ahead of a stalled one is refused, without
//! consuming its batch), bounded memory on a long stream, and refused pushes as no-ops for every engine.

use std::sync::Arc;

use crate::join_support::{opts, pairs, ts_batch};
use arrow_array::{Float64Array, Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use proptest::prelude::*;
use windgate_core::ErrorKind;
use windgate_core::aggregate::{LatenessOpt, OnLate, Span};
use windgate_core::join::{BandJoinOptions, BandJoiner, JoinStrategy, Predicate, Side, band_join};

/// Rows `(ts, v)` with a float64 band column `v`.
fn band_batch(rows: &[(i64, f64)]) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("ts", DataType::Int64, false),
        Field::new("v", DataType::Float64, false),
    ]));
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0))),
            Arc::new(Float64Array::from_iter_values(rows.iter().map(|r| r.1))),
        ],
    )
    .unwrap()
}

fn engines() -> [(JoinStrategy, usize); 5] {
    [
        (JoinStrategy::Reference, 1),
        (JoinStrategy::Serial, 1),
        (JoinStrategy::ScaleJoin, 1),
        (JoinStrategy::ScaleJoin, 2),
        (JoinStrategy::ScaleJoin, 4),
    ]
}

#[track_caller]
fn param_error(o: BandJoinOptions, param: &str) {
    let e = BandJoiner::new(o).err().expect("an error");
    assert_eq!(e.kind(), ErrorKind::InvalidParameter, "{}", e.message());
    assert!(e.message().starts_with(param), "{}", e.message());
}

#[test]
fn parameters_out_of_range_are_named() {
    let base = opts(1, Some(0), JoinStrategy::Auto, 2);
    let mut o = base.clone();
    o.threads = Some(10_000);
    param_error(o, "threads");
    let mut o = base.clone();
    o.threads = Some(0);
    param_error(o, "threads");
    let mut o = base.clone();
    o.window = Some(Span::Units(-1));
    param_error(o, "window");
    let mut o = base.clone();
    o.credits = Some(0);
    param_error(o, "credits");
    for eps in [f64::NAN, f64::INFINITY, -1.0] {
        let mut o = base.clone();
        o.on = vec![Predicate::Band {
            left: "v".into(),
            right: "v".into(),
            eps,
        }];
        param_error(o, "on");
    }
    let mut o = base.clone();
    o.lateness = LatenessOpt::Bound(Span::Units(-1));
    let mut j = BandJoiner::new(o).unwrap();
    let e = j.push(&ts_batch([1]), Side::Left).unwrap_err();
    assert!(e.message().starts_with("lateness"), "{}", e.message());
}

/// Huge windows, lateness and eps work (saturating arithmetic, no probe through 2^63 empty cells).
#[test]
fn huge_parameters_work() {
    let l = band_batch(&[(i64::MIN + 1, -1e308), (0, 0.0), (i64::MAX, 1e308)]);
    let r = band_batch(&[(i64::MIN + 2, -1.5e308), (1, 5e307), (i64::MAX, -1e308)]);
    for (strategy, threads) in engines() {
        let mut o = opts(1 << 62, Some(1 << 62), strategy, threads);
        o.on = vec![Predicate::Band {
            left: "v".into(),
            right: "v".into(),
            eps: 1e308,
        }];
        let (_, out) = band_join(
            (l.schema(), vec![Ok(l.clone())]),
            (r.schema(), vec![Ok(r.clone())]),
            o,
            || Ok(()),
        )
        .unwrap();
        // Within 2^62 in time: the pairs at either end and near 0; the last (values 1e308 and -1e308, whose
        // probe range overflows to -inf) is 2e308 apart in value.
        let got = pairs(&out);
        assert_eq!(
            got,
            vec![(i64::MIN + 1, i64::MIN + 2), (0, 1)],
            "{strategy:?} x{threads}"
        );
    }
}

/// One side runs ahead of a stalled one: once it has `credits` rows pending, a push is refused (naming the
/// side to feed), nothing is consumed, and after the other side moves the same batch goes through. The
/// rows are those of an unbounded joiner fed the accepted pushes.
#[test]
fn credits_refuse_a_side_that_runs_ahead() {
    for (strategy, threads) in engines() {
        let mut o = opts(5, Some(0), strategy, threads);
        o.credits = Some(1000);
        let mut j = BandJoiner::new(o.clone()).unwrap();
        let mut outs = vec![j.push(&ts_batch([0]), Side::Right).unwrap()];
        let mut refused = None;
        for k in 0..20 {
            let b = ts_batch(k * 100..(k + 1) * 100);
            match j.push(&b, Side::Left) {
                Ok(out) => outs.push(out),
                Err(e) => {
                    refused = Some((k, b, e));
                    break;
                }
            }
        }
        let (k, b, e) = refused.expect("a push beyond the credits is refused");
        assert_eq!(k, 10, "{strategy:?} x{threads}");
        assert_eq!(e.kind(), ErrorKind::Backpressure);
        assert!(e.message().contains("right input holds"), "{}", e.message());
        let s = j.stats();
        assert_eq!(s.rows_in, [1000, 1]);
        assert_eq!(s.pending_rows[0], 998);
        assert_eq!(s.backpressured, 1);
        // The stalled side itself is never refused, whatever it has pending.
        outs.push(j.push(&ts_batch(1..2000), Side::Right).unwrap());
        assert_eq!(j.stats().pending_rows[0], 0);
        outs.push(j.push(&b, Side::Left).unwrap());
        outs.push(j.flush().unwrap());

        let mut unbounded = o.clone();
        unbounded.credits = None;
        let mut u = BandJoiner::new(unbounded).unwrap();
        let mut want = vec![u.push(&ts_batch([0]), Side::Right).unwrap()];
        for k in 0..10 {
            want.push(
                u.push(&ts_batch(k * 100..(k + 1) * 100), Side::Left)
                    .unwrap(),
            );
        }
        want.push(u.push(&ts_batch(1..2000), Side::Right).unwrap());
        want.push(u.push(&b, Side::Left).unwrap());
        want.push(u.flush().unwrap());
        assert!(pairs(&outs) == pairs(&want), "{strategy:?} x{threads}");
    }
}

/// The batch function pushes all of one side first: it is never refused.
#[test]
fn the_batch_function_ignores_credits() {
    let t = ts_batch(0..5000);
    let mut o = opts(1, Some(0), JoinStrategy::ScaleJoin, 2);
    o.credits = Some(10);
    let (_, out) = band_join(
        (
            t.schema(),
            vec![Ok(t.slice(0, 2500)), Ok(t.slice(2500, 2500))],
        ),
        (t.schema(), vec![Ok(t.clone())]),
        o,
        || Ok(()),
    )
    .unwrap();
    assert_eq!(pairs(&out).len(), 3 * 5000 - 2);
}

/// A long stream in many pushes of both sides: what the joiner holds (batches kept for output rows, window
/// tuples, rows waiting) stays bounded by the window and lateness, not by the stream's length.
#[test]
fn memory_stays_bounded_on_a_long_stream() {
    let total: i64 = if cfg!(debug_assertions) {
        100_000
    } else {
        // The Python suite runs 2M rows; this keeps `cargo test --release` short.
        500_000
    };
    let step = 1000;
    for (strategy, threads) in [(JoinStrategy::Serial, 1), (JoinStrategy::ScaleJoin, 2)] {
        let mut j = BandJoiner::new(opts(100, Some(10), strategy, threads)).unwrap();
        let (mut held, mut pairs_out) = (0u64, 0u64);
        for k in 0..total / step {
            for side in Side::BOTH {
                // A little disorder within the lateness.
                let b = ts_batch((k * step..(k + 1) * step).map(|t| t + (t % 7) - 3));
                pairs_out += j.push(&b, side).unwrap().num_rows() as u64;
                let s = j.stats();
                let now = s.retained_rows.iter().sum::<u64>()
                    + s.window_rows
                    + s.buffered_rows
                    + s.pending_rows.iter().sum::<u64>();
                held = held.max(now);
            }
        }
        pairs_out += j.flush().unwrap().num_rows() as u64;
        assert!(pairs_out > total as u64 * 100, "{pairs_out}");
        // Two or three batches a side, the windows and the rows within the lateness.
        eprintln!("{strategy:?}: held up to {held} rows");
        assert!(held < 10_000, "{strategy:?}: held up to {held} rows");
    }
}

/// Pushes of either side (`true`: left), each a run of consecutive times with some late rows.
fn pushes() -> impl Strategy<Value = Vec<(bool, Vec<i64>)>> {
    proptest::collection::vec(
        (any::<bool>(), proptest::collection::vec(-3i64..4, 1..30)),
        1..25,
    )
    .prop_map(|ps| {
        let mut at = [0i64, 0];
        ps.into_iter()
            .map(|(left, steps)| {
                let a = &mut at[usize::from(!left)];
                let rows = steps
                    .into_iter()
                    .map(|d| {
                        *a += d.max(0);
                        *a + d.min(0)
                    })
                    .collect();
                (left, rows)
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

    /// A refused push (credits used up, or a late row under `on_late="error"`) is a no-op: the rows of every
    /// push are those of an unbounded joiner fed only the accepted pushes, for every engine.
    #[test]
    fn refused_pushes_change_nothing(
        ps in pushes(),
        credits in 1u64..40,
        lateness in 0i64..3,
        window in 0i64..6,
    ) {
        for (strategy, threads) in engines() {
            let mut o = opts(window, Some(lateness), strategy, threads);
            o.on_late = OnLate::Error;
            o.credits = Some(credits);
            let mut j = BandJoiner::new(o.clone()).unwrap();
            o.credits = None;
            let mut u = BandJoiner::new(o).unwrap();
            for (left, rows) in &ps {
                let side = if *left { Side::Left } else { Side::Right };
                let b = ts_batch(rows.iter().copied());
                match j.push(&b, side) {
                    Ok(got) => {
                        let want = u.push(&b, side).unwrap();
                        prop_assert_eq!(pairs(&[got]), pairs(&[want]));
                    }
                    Err(e) => prop_assert!(
                        matches!(e.kind(), ErrorKind::Backpressure | ErrorKind::LateRow),
                        "{}", e.message()
                    ),
                }
                prop_assert_eq!(j.stats().rows_in, u.stats().rows_in);
            }
            prop_assert_eq!(pairs(&[j.flush().unwrap()]), pairs(&[u.flush().unwrap()]));
        }
    }
}
