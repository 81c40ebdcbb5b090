//! Band join checkpoints: a joiner snapshotted after any push and restored with any thread count and strategy
//! (and restored again from the restored one) continues with exactly the rows, in the order, of the
//! uninterrupted run, push by push; bytes that are truncated, changed or of another query are refused with a
//! named error, never a panic.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use arrow_array::{Float64Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use proptest::prelude::*;
use windgate_core::ErrorKind;
use windgate_core::aggregate::{LatenessOpt, Span};
use windgate_core::interrupt;
use windgate_core::join::{
    BandJoinOptions, BandJoiner, JoinHow, JoinStrategy, Predicate, Semantics, Side,
};

/// A row: (ts, band value (nullable), second band value (may be NaN), equality key).
type Row = (i64, Option<i64>, f64, i64);

fn batch(rows: &[Row], side: Side) -> RecordBatch {
    let (v1, v2) = match side {
        Side::Left => ("x", "y"),
        Side::Right => ("a", "b"),
    };
    let schema = Arc::new(Schema::new(vec![
        Field::new("ts", DataType::Int64, false),
        Field::new(v1, DataType::Int64, true),
        Field::new(v2, DataType::Float64, false),
        Field::new("k", DataType::Utf8, false),
    ]));
    let keys: Vec<String> = rows.iter().map(|r| format!("k{}", r.3)).collect();
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0))),
            Arc::new(Int64Array::from_iter(rows.iter().map(|r| r.1))),
            Arc::new(Float64Array::from_iter_values(rows.iter().map(|r| r.2))),
            Arc::new(StringArray::from_iter_values(keys)),
        ],
    )
    .unwrap()
}

/// The query of a case: everything but the runtime settings.
#[derive(Debug, Clone)]
struct Query {
    window: i64,
    eps: (u8, Option<u8>),
    eq: bool,
    scalejoin: bool,
    left_outer: bool,
    lateness: Option<i64>,
}

impl Query {
    fn options(&self, strategy: JoinStrategy, threads: usize, index: bool) -> BandJoinOptions {
        let mut on = vec![Predicate::Band {
            left: "x".into(),
            right: "a".into(),
            eps: self.eps.0 as f64,
        }];
        if let Some(e) = self.eps.1 {
            on.push(Predicate::Band {
                left: "y".into(),
                right: "b".into(),
                eps: e as f64 * 0.5,
            });
        }
        if self.eq {
            on.push(Predicate::Eq {
                left: "k".into(),
                right: "k".into(),
            });
        }
        let mut o = BandJoinOptions::new(("ts".into(), "ts".into()), Span::Units(self.window), on);
        o.semantics = if self.scalejoin {
            Semantics::ScaleJoin
        } else {
            Semantics::Interval
        };
        o.how = if self.left_outer {
            JoinHow::Left
        } else {
            JoinHow::Inner
        };
        o.lateness = self
            .lateness
            .map_or(LatenessOpt::Exact, |k| LatenessOpt::Bound(Span::Units(k)));
        o.strategy = strategy;
        o.threads = Some(threads);
        o.index = index;
        o
    }
}

/// One run's settings: strategy, threads, index.
type Runtime = (JoinStrategy, usize, bool);

fn runtime() -> impl Strategy<Value = Runtime> {
    (
        prop_oneof![
            Just(JoinStrategy::Reference),
            Just(JoinStrategy::Serial),
            Just(JoinStrategy::ScaleJoin),
            Just(JoinStrategy::Auto),
        ],
        1usize..=3,
        any::<bool>(),
    )
}

fn row() -> impl Strategy<Value = Row> {
    (
        0i64..80,
        proptest::option::weighted(0.9, 0i64..8),
        prop_oneof![9 => (0i64..8).prop_map(|v| v as f64 * 0.5), 1 => Just(f64::NAN)],
        0i64..3,
    )
}

/// Rows sorted by time, then each delayed by at most `k` (disorder within the lateness bound).
fn disordered(mut rows: Vec<Row>, delays: &[u8], k: i64) -> Vec<Row> {
    rows.sort_by_key(|r| r.0);
    let mut keyed: Vec<(i64, usize, Row)> = rows
        .into_iter()
        .enumerate()
        .map(|(i, r)| (r.0 + delays[i % delays.len()] as i64 % (k + 1), i, r))
        .collect();
    keyed.sort_by_key(|x| (x.0, x.1));
    keyed.into_iter().map(|x| x.2).collect()
}

/// Both sides cut into pushes, interleaved as `splits` says.
fn pushes(l: &[Row], r: &[Row], splits: &[(bool, usize)]) -> Vec<(Side, Vec<Row>)> {
    let mut out = vec![];
    let (mut li, mut ri) = (0, 0);
    for &(left, n) in splits.iter().cycle().take(400) {
        let (side, rows, i) = if left {
            (Side::Left, l, &mut li)
        } else {
            (Side::Right, r, &mut ri)
        };
        let end = (*i + n).min(rows.len());
        if *i < end {
            out.push((side, rows[*i..end].to_vec()));
            *i = end;
        }
        if li == l.len() && ri == r.len() {
            break;
        }
    }
    out.push((Side::Left, l[li..].to_vec()));
    out.push((Side::Right, r[ri..].to_vec()));
    out
}

type Case = (Query, Vec<(Side, Vec<Row>)>);

fn case() -> impl Strategy<Value = Case> {
    (
        proptest::collection::vec(row(), 0..50),
        proptest::collection::vec(row(), 0..50),
        proptest::collection::vec(any::<u8>(), 1..20),
        proptest::collection::vec((any::<bool>(), 1usize..10), 1..8),
        0i64..10,
        (0u8..3, proptest::option::of(0u8..3), any::<bool>()),
        (any::<bool>(), any::<bool>()),
        prop_oneof![1 => Just(None), 4 => (0i64..5).prop_map(Some)],
    )
        .prop_map(
            |(l, r, delays, splits, window, (e1, e2, eq), (scalejoin, left_outer), lateness)| {
                let k = lateness.unwrap_or(40);
                let (l, r) = (disordered(l, &delays, k), disordered(r, &delays, k));
                let query = Query {
                    window,
                    eps: (e1, e2),
                    eq,
                    scalejoin,
                    left_outer,
                    lateness,
                };
                (query, pushes(&l, &r, &splits))
            },
        )
}

/// Every push's output and the flush's, from a fresh joiner.
fn uninterrupted(q: &Query, rt: Runtime, input: &[(Side, Vec<Row>)]) -> Vec<RecordBatch> {
    let mut j = BandJoiner::new(q.options(rt.0, rt.1, rt.2)).unwrap();
    let mut out: Vec<RecordBatch> = input
        .iter()
        .map(|(s, rows)| j.push(&batch(rows, *s), *s).unwrap())
        .collect();
    out.push(j.flush().unwrap());
    out
}

fn push_all(j: &mut BandJoiner, input: &[(Side, Vec<Row>)]) -> Vec<RecordBatch> {
    input
        .iter()
        .map(|(s, rows)| j.push(&batch(rows, *s), *s).unwrap())
        .collect()
}

/// The same run, snapshotted after push `cut1` and restored with `second`'s settings, snapshotted again
/// after push `cut2` and restored with the snapshot's own settings.
fn interrupted(
    q: &Query,
    runs: [Runtime; 2],
    input: &[(Side, Vec<Row>)],
    (cut1, cut2): (usize, usize),
) -> (Vec<RecordBatch>, BandJoiner) {
    let [first, second] = runs;
    let mut j = BandJoiner::new(q.options(first.0, first.1, first.2)).unwrap();
    let mut out = push_all(&mut j, &input[..cut1]);
    let data = j.snapshot(&BTreeMap::new()).unwrap();
    drop(j);
    let mut j = BandJoiner::restore(&data, Some(q.options(second.0, second.1, second.2))).unwrap();
    out.extend(push_all(&mut j, &input[cut1..cut2]));
    let data = j.snapshot(&BTreeMap::new()).unwrap();
    let mut j = BandJoiner::restore(&data, None).unwrap();
    out.extend(push_all(&mut j, &input[cut2..]));
    out.push(j.flush().unwrap());
    (out, j)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, failure_persistence: None, ..ProptestConfig::default() })]

    /// Restoring anywhere, into any engine and thread count, changes no row and no order.
    #[test]
    fn a_restored_joiner_continues_exactly(
        (q, input) in case(),
        runs in proptest::array::uniform3(runtime()),
        cuts in (0usize..64, 0usize..64),
    ) {
        let n = input.len();
        let (a, b) = (cuts.0 % (n + 1), cuts.1 % (n + 1));
        let cuts = (a.min(b), a.max(b));
        let want = uninterrupted(&q, runs[0], &input);
        let (got, j) = interrupted(&q, [runs[1], runs[2]], &input, cuts);
        prop_assert_eq!(got.len(), want.len());
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            prop_assert_eq!(g, w, "call {} of {} (cuts {:?})", i, want.len(), cuts);
        }
        let pairs: u64 = want.iter().map(|b| b.num_rows() as u64).sum();
        let s = j.stats();
        prop_assert_eq!(s.pairs_out + s.unmatched_rows, pairs);
        let rows: Vec<u64> = Side::BOTH
            .iter()
            .map(|s| input.iter().filter(|p| p.0 == *s).map(|p| p.1.len() as u64).sum())
            .collect();
        prop_assert_eq!(s.rows_in.to_vec(), rows);
    }
}

fn sample_snapshot() -> (BandJoiner, Vec<u8>) {
    let q = Query {
        window: 5,
        eps: (2, None),
        eq: true,
        scalejoin: false,
        left_outer: true,
        lateness: Some(2),
    };
    let mut j = BandJoiner::new(q.options(JoinStrategy::ScaleJoin, 2, true)).unwrap();
    let rows: Vec<Row> = (0..40).map(|i| (i, Some(i % 4), 0.0, i % 3)).collect();
    j.push(&batch(&rows[..30], Side::Left), Side::Left).unwrap();
    j.push(&batch(&rows[..20], Side::Right), Side::Right)
        .unwrap();
    let data = j.snapshot(&BTreeMap::new()).unwrap();
    (j, data)
}

#[test]
fn truncated_or_changed_bytes_are_a_snapshot_error() {
    let (_, data) = sample_snapshot();
    for n in (0..data.len()).step_by(7).chain([data.len() - 1]) {
        let e = BandJoiner::restore(&data[..n], None)
            .err()
            .expect("refused");
        assert_eq!(e.kind(), ErrorKind::Snapshot, "{n}: {e}");
    }
    for i in (0..data.len()).step_by(5) {
        let mut bad = data.clone();
        bad[i] ^= 0x41;
        let e = BandJoiner::restore(&bad, None).err().expect("refused");
        assert_eq!(e.kind(), ErrorKind::Snapshot, "byte {i}: {e}");
    }
    let e = BandJoiner::restore(b"not a snapshot at all", None)
        .err()
        .unwrap();
    assert_eq!(e.kind(), ErrorKind::Snapshot);
}

#[test]
fn another_query_is_a_mismatch_naming_the_parameter() {
    let (j, data) = sample_snapshot();
    let opts = BandJoiner::snapshot_options(&data).unwrap();
    let mut other = opts.clone();
    other.window = Some(Span::Units(6));
    let e = BandJoiner::restore(&data, Some(other)).err().unwrap();
    assert_eq!(e.kind(), ErrorKind::SnapshotMismatch);
    assert!(e.message().starts_with("window:"), "{e}");
    let mut other = opts.clone();
    other.how = JoinHow::Inner;
    let e = BandJoiner::restore(&data, Some(other)).err().unwrap();
    assert!(e.message().starts_with("how:"), "{e}");
    // Runtime settings may change.
    let mut other = opts;
    other.threads = Some(3);
    other.strategy = JoinStrategy::Reference;
    other.index = false;
    other.credits = None;
    let r = BandJoiner::restore(&data, Some(other)).unwrap();
    assert_eq!(r.stats().strategy, "reference");
    assert_eq!(r.stats().pairs_out, j.stats().pairs_out);
}

#[test]
fn a_flushed_joiner_restores_flushed() {
    let (mut j, _) = sample_snapshot();
    j.flush().unwrap();
    let data = j.snapshot(&BTreeMap::new()).unwrap();
    let mut r = BandJoiner::restore(&data, None).unwrap();
    assert_eq!(r.stats().pairs_out, j.stats().pairs_out);
    assert_eq!(r.flush().unwrap_err().kind(), ErrorKind::InvalidParameter);
}

#[test]
fn a_fresh_joiner_round_trips() {
    let q = Query {
        window: 1,
        eps: (0, None),
        eq: false,
        scalejoin: true,
        left_outer: false,
        lateness: None,
    };
    let mut j = BandJoiner::new(q.options(JoinStrategy::Serial, 1, true)).unwrap();
    let data = j
        .snapshot(&BTreeMap::from([("note".into(), "hi".into())]))
        .unwrap();
    let mut r = BandJoiner::restore(&data, None).unwrap();
    let rows = [(1, Some(0), 0.0, 0)];
    r.push(&batch(&rows, Side::Left), Side::Left).unwrap();
    r.push(&batch(&rows, Side::Right), Side::Right).unwrap();
    assert_eq!(r.flush().unwrap().num_rows(), 1);
}

#[test]
fn a_poisoned_joiner_refuses_to_snapshot() {
    fn stop() -> windgate_core::Result<()> {
        Err(windgate_core::Error::new(ErrorKind::Input, "Ctrl-C"))
    }
    let big: Vec<Row> = (0..70_000).map(|i| (i, Some(0), 0.0, 0)).collect();
    let q = Query {
        window: 1,
        eps: (0, None),
        eq: false,
        scalejoin: false,
        left_outer: false,
        lateness: Some(0),
    };
    let mut j = BandJoiner::new(q.options(JoinStrategy::Serial, 1, false)).unwrap();
    j.push(&batch(&big, Side::Left), Side::Left).unwrap();
    let e = interrupt::scope(stop, || {
        std::thread::sleep(interrupt::PERIOD + Duration::from_millis(5));
        j.push(&batch(&big, Side::Right), Side::Right).unwrap_err()
    });
    assert_eq!(e.kind(), ErrorKind::Interrupted);
    let e = j.snapshot(&BTreeMap::new()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Poisoned);
    assert!(e.message().starts_with("snapshot:"), "{e}");
}
