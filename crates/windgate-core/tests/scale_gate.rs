//! ScaleGate under real threads: every reader gets the sorted merge of all sources, nothing
//! lost or duplicated, never an item before every source has published past it. Run long with
//! `cargo test --release --test scale_gate` (the case count scales up in release builds).

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::thread;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use windgate_core::order::scale_gate::{NextItem, ScaleGate};

/// One random case: `sources` sorted key lists (with ties inside and across sources), `readers` readers,
/// jitter from yields. Keys are `(k, source, seq)`, a total order, so the merge is unique.
fn run_case(lists: Vec<Vec<i64>>, readers: usize, levels: usize, jitter: u64) {
    let n = lists.len();
    let (srcs, rdrs) = ScaleGate::new::<(i64, usize, usize), u64>(n, readers, levels);
    // High-water marks: set before each add, so a reader that sees key k must find every open source's mark
    // at or above k (the readiness rule).
    let marks: Arc<Vec<AtomicI64>> = Arc::new((0..n).map(|_| AtomicI64::new(i64::MIN)).collect());
    let mut expected: Vec<(i64, usize, usize)> = lists
        .iter()
        .enumerate()
        .flat_map(|(j, l)| l.iter().enumerate().map(move |(i, &k)| (k, j, i)))
        .collect();
    expected.sort();
    thread::scope(|s| {
        for (j, (mut src, list)) in srcs.into_iter().zip(lists).enumerate() {
            let marks = marks.clone();
            s.spawn(move || {
                let mut rng = jitter ^ j as u64;
                for (i, k) in list.into_iter().enumerate() {
                    marks[j].store(k, Ordering::SeqCst);
                    src.add((k, j, i), (k as u64) ^ 0xabc);
                    rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1);
                    if rng >> 61 == 0 {
                        thread::yield_now();
                    }
                }
                marks[j].store(i64::MAX, Ordering::SeqCst);
                src.close();
            });
        }
        let handles: Vec<_> = rdrs
            .into_iter()
            .map(|mut r| {
                let marks = marks.clone();
                s.spawn(move || {
                    let mut got = vec![];
                    loop {
                        match r.next_ready() {
                            NextItem::Item(k, v) => {
                                assert_eq!(*v, (k.0 as u64) ^ 0xabc);
                                for m in marks.iter() {
                                    assert!(
                                        m.load(Ordering::SeqCst) >= k.0,
                                        "released early: {k:?}"
                                    );
                                }
                                got.push(k);
                            }
                            NextItem::Pending => thread::yield_now(),
                            NextItem::End => return got,
                        }
                    }
                })
            })
            .collect();
        for h in handles {
            assert_eq!(h.join().unwrap(), expected);
        }
    });
}

fn sorted_list(max_len: usize) -> impl Strategy<Value = Vec<i64>> {
    proptest::collection::vec(0i64..40, 0..max_len).prop_map(|mut v| {
        v.sort();
        v
    })
}

#[test]
fn merge_oracle_under_threads() {
    let cases = if cfg!(debug_assertions) { 40 } else { 400 };
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(
            &(
                proptest::collection::vec(sorted_list(300), 1..=8),
                1usize..=8,
                1usize..=windgate_core::order::scale_gate::MAX_LEVELS,
                any::<u64>(),
            ),
            |(lists, readers, levels, jitter)| {
                run_case(lists, readers, levels, jitter);
                Ok(())
            },
        )
        .unwrap();
}

/// A long run: 4 sources x 100k items, 3 readers.
#[test]
fn long_stress() {
    let per = if cfg!(debug_assertions) {
        10_000
    } else {
        100_000
    };
    let lists = (0..4)
        .map(|j| (0..per).map(|i| (i * 3 + j) / 7).collect())
        .collect();
    run_case(lists, 3, 4, 7);
}
