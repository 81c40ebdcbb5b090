//! Band join under hostile input: one side stalled, pushes far larger than the engine's lag bound, every
//! thread count. Each run is watched by a timeout, so a deadlock fails the test instead of hanging it.

use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use crate::join_support::{opts, pairs, ts_batch};
use arrow_array::{Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use windgate_core::ErrorKind;
use windgate_core::interrupt;
use windgate_core::join::{BandJoiner, JoinStrategy, Side, band_join};
use windgate_core::order::admission::OnLate;

/// More than the threaded engine's lag bound (2^16 tuples), so the caller's back-pressure wait runs.
const BIG: i64 = 70_000;

/// Runs `f` on its own thread; fails if it does not return within `secs` (a deadlock).
fn within<T: Send + 'static>(secs: u64, what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(v) => v,
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("{what}: no answer within {secs} s (deadlock)")
        }
        Err(e) => panic!("{what}: the run panicked ({e})"),
    }
}

fn engines() -> Vec<(JoinStrategy, usize)> {
    let mut v = vec![(JoinStrategy::Serial, 1)];
    v.extend((1..=8).map(|n| (JoinStrategy::ScaleJoin, n)));
    v
}

/// The batch function pushes all of the left input, then all of the right: with a finite lateness, nothing
/// of the left is ready until the right arrives, so the caller must not wait for the threads meanwhile.
#[test]
fn batch_function_with_lateness_does_not_deadlock() {
    let n = BIG;
    for (strategy, threads) in [(JoinStrategy::ScaleJoin, 2), (JoinStrategy::ScaleJoin, 4)] {
        let rows = within(120, "band_join", move || {
            let t = ts_batch(0..n);
            let (_, out) = band_join(
                (t.schema(), vec![Ok(t.clone())]),
                (t.schema(), vec![Ok(t)]),
                opts(1, Some(0), strategy, threads),
                || Ok(()),
            )
            .unwrap();
            out.iter().map(|b| b.num_rows()).sum::<usize>()
        });
        // Each ts pairs with ts-1, ts, ts+1 of the other side.
        assert_eq!(rows as i64, 3 * n - 2, "{strategy:?} x{threads}");
    }
}

/// One side pushed alone, far past the lag bound: the push returns (with nothing ready), and the pairs come
/// once the other side arrives, identical for every engine.
#[test]
fn one_side_alone_past_the_lag_bound() {
    let mut want: Option<Vec<(i64, i64)>> = None;
    for (strategy, threads) in engines() {
        let got = within(120, "stalled side", move || {
            let o = opts(1, Some(0), strategy, threads);
            let mut j = BandJoiner::new(o).unwrap();
            let first = j.push(&ts_batch(0..BIG), Side::Left).unwrap();
            assert_eq!(first.num_rows(), 0);
            let mut outs = vec![first];
            // Tiny pushes of the other side, then one far larger than the lag bound.
            for t in 0..50 {
                outs.push(j.push(&ts_batch([t]), Side::Right).unwrap());
            }
            outs.push(j.push(&ts_batch(50..BIG), Side::Right).unwrap());
            outs.push(j.flush().unwrap());
            pairs(&outs)
        });
        assert_eq!(got.len() as i64, 3 * BIG - 2, "{strategy:?} x{threads}");
        match &want {
            None => want = Some(got),
            Some(w) => assert!(
                *w == got,
                "{strategy:?} x{threads}: rows differ from serial"
            ),
        }
    }
}

/// Both sides interleaved in pushes of every size, with and without lateness: every engine returns the
/// serial engine's rows push by push.
#[test]
fn interleaved_pushes_of_every_size() {
    let sizes = [1usize, 7, 1000, BIG as usize];
    for lateness in [Some(0), Some(5), None] {
        let mut want: Option<Vec<Vec<(i64, i64)>>> = None;
        for (strategy, threads) in engines() {
            let got = within(120, "interleaved", move || {
                let mut j = BandJoiner::new(opts(1, lateness, strategy, threads)).unwrap();
                let (mut l, mut r) = (0i64, 0i64);
                let mut outs = vec![];
                for (i, &n) in sizes.iter().cycle().take(12).enumerate() {
                    let n = n as i64;
                    let (side, at) = if i % 3 == 1 {
                        (Side::Right, &mut r)
                    } else {
                        (Side::Left, &mut l)
                    };
                    let b = ts_batch(*at..*at + n);
                    *at += n;
                    outs.push(pairs(&[j.push(&b, side).unwrap()]));
                }
                outs.push(pairs(&[j.flush().unwrap()]));
                outs
            });
            match &want {
                None => want = Some(got),
                Some(w) => assert!(
                    *w == got,
                    "lateness {lateness:?}, {strategy:?} x{threads}: rows differ from serial"
                ),
            }
        }
    }
}

/// A batch rejected for a late row leaves the joiner exactly as before: pushing it again without the late row
/// gives the rows of a joiner that never saw it (the rows before the late one are not kept twice), and the
/// error names the row within the batch.
#[test]
fn a_rejected_batch_can_be_retried() {
    for (strategy, threads) in [
        (JoinStrategy::Reference, 1),
        (JoinStrategy::Serial, 1),
        (JoinStrategy::ScaleJoin, 3),
    ] {
        let mut o = opts(10, Some(0), strategy, threads);
        o.on_late = OnLate::Error;
        let run = |retry: bool| {
            let mut j = BandJoiner::new(o.clone()).unwrap();
            let mut outs = vec![j.push(&ts_batch([2, 6]), Side::Right).unwrap()];
            let mut error = None;
            if retry {
                let e = j.push(&ts_batch([7, 0, 8]), Side::Left).unwrap_err();
                assert_eq!(e.kind(), ErrorKind::LateRow);
                error = Some(e.message().to_string());
            }
            outs.push(j.push(&ts_batch([7, 8]), Side::Left).unwrap());
            outs.push(j.push(&ts_batch([20]), Side::Right).unwrap());
            outs.push(j.flush().unwrap());
            (pairs(&outs), j.stats().rows_in, error)
        };
        let (want, rows_in, _) = run(false);
        assert_eq!(want, vec![(7, 2), (7, 6), (8, 2), (8, 6)], "{strategy:?}");
        let (got, got_rows_in, error) = run(true);
        assert_eq!((got, got_rows_in), (want, rows_in), "{strategy:?}");
        let error = error.unwrap();
        assert!(error.contains("row 1 of this batch"), "{error}");
    }
}

/// A rejected first batch does not bind its side: a batch of another schema is then accepted.
#[test]
fn a_rejected_first_batch_binds_nothing() {
    let mut o = opts(10, Some(0), JoinStrategy::Serial, 1);
    o.on_late = OnLate::Error;
    let mut j = BandJoiner::new(o).unwrap();
    assert!(j.push(&ts_batch([7, 0]), Side::Left).is_err());
    let schema = Arc::new(Schema::new(vec![
        Field::new("ts", DataType::Int64, false),
        Field::new("v", DataType::Int64, false),
    ]));
    let wide = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from(vec![1])),
            Arc::new(Int64Array::from(vec![5])),
        ],
    )
    .unwrap();
    j.push(&wide, Side::Left).unwrap();
    j.push(&ts_batch([1, 2]), Side::Right).unwrap();
    let out = j.flush().unwrap();
    assert_eq!(out.num_rows(), 2);
    assert!(out.column_by_name("left_v").is_some());
}

/// Ctrl-C while a push runs: the push returns `Interrupted` unchanged (the bindings raise the signal
/// handler's exception), and the joiner, whose engine may be mid-flight, refuses further work.
#[test]
fn an_interrupted_push_poisons_the_joiner() {
    fn stop() -> windgate_core::Result<()> {
        Err(windgate_core::Error::new(ErrorKind::Input, "Ctrl-C"))
    }
    for (strategy, threads) in [
        (JoinStrategy::Reference, 1),
        (JoinStrategy::Serial, 1),
        (JoinStrategy::ScaleJoin, 2),
    ] {
        within(120, "interrupt", move || {
            let mut j = BandJoiner::new(opts(1, Some(0), strategy, threads)).unwrap();
            j.push(&ts_batch(0..BIG), Side::Left).unwrap();
            let e = interrupt::scope(stop, || {
                std::thread::sleep(interrupt::PERIOD + Duration::from_millis(5));
                j.push(&ts_batch(0..BIG), Side::Right).unwrap_err()
            });
            assert_eq!(e.kind(), ErrorKind::Interrupted, "{strategy:?}");
            let again = j.push(&ts_batch([BIG]), Side::Right).unwrap_err();
            assert_eq!(again.kind(), ErrorKind::Poisoned, "{strategy:?}");
            assert!(
                again.message().contains("interrupted"),
                "{}",
                again.message()
            );
        });
    }
}
