//! The edge cases of multiway aggregation (e01-e25), one named test each, run on every multiway design (and the
//! pane and reference engines, which must agree). e17 is scaled down (10^5 keys).

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int64Type};
use arrow_array::{Array, ArrayRef, Float64Array, Int32Array, Int64Array, RecordBatch};
use arrow_select::concat::concat_batches;
use windgate_core::aggregate::{
    Span, Strategy, WindowAggregateOptions, WindowAggregator, window_aggregate,
};

/// The single-threaded engines (the oracles) and every design of the registry that merges time-sorted sources.
fn engines() -> Vec<Strategy> {
    let mut engines = vec![Strategy::Reference, Strategy::Pane];
    engines.extend(Strategy::those(|caps| caps.sorted_sources));
    engines
}

fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn opts(engine: Strategy, sources: usize, size: i64, slide: i64) -> WindowAggregateOptions {
    let mut o = WindowAggregateOptions::new(
        "ts",
        Span::Units(size),
        vec![
            ("*".into(), names(&["count"])),
            ("v".into(), names(&["sum", "first", "last", "mean"])),
        ],
    );
    o.slide = Some(Span::Units(slide));
    o.by = vec!["k".into()];
    o.strategy = engine;
    o.sources = sources;
    o
}

fn rows(ts: &[i64], k: &[Option<i32>], v: &[Option<f64>]) -> RecordBatch {
    RecordBatch::try_from_iter([
        ("ts", Arc::new(Int64Array::from(ts.to_vec())) as ArrayRef),
        ("k", Arc::new(Int32Array::from(k.to_vec())) as ArrayRef),
        ("v", Arc::new(Float64Array::from(v.to_vec())) as ArrayRef),
    ])
    .unwrap()
}

/// `n` rows of key 1 and value 1.0 at times `ts`.
fn at(ts: &[i64]) -> RecordBatch {
    rows(ts, &vec![Some(1); ts.len()], &vec![Some(1.0); ts.len()])
}

fn col_i64(b: &RecordBatch, name: &str) -> Vec<i64> {
    b.column_by_name(name)
        .unwrap()
        .as_primitive::<Int64Type>()
        .values()
        .to_vec()
}

fn col_f64(b: &RecordBatch, name: &str) -> Vec<Option<f64>> {
    let a = b
        .column_by_name(name)
        .unwrap()
        .as_primitive::<Float64Type>();
    (0..a.len())
        .map(|i| a.is_valid(i).then(|| a.value(i)))
        .collect()
}

fn whole(engine: Strategy, size: i64, slide: i64, sources: &[RecordBatch]) -> RecordBatch {
    let inputs = sources
        .iter()
        .map(|b| (b.schema(), vec![Ok(b.clone())]))
        .collect();
    let wg = window_aggregate(inputs, opts(engine, sources.len(), size, slide), || Ok(())).unwrap();
    let (schema, outs) = (wg.schema, wg.batches);
    concat_batches(&schema, &outs).unwrap()
}

/// Runs `f` for every engine and checks they all return the reference's batch.
fn agree(f: impl Fn(Strategy) -> RecordBatch) -> RecordBatch {
    let want = f(Strategy::Reference);
    for e in engines() {
        assert_eq!(f(e), want, "{e:?}");
    }
    want
}

#[test]
fn e01_one_source_last_row_comes_out_after_close() {
    for e in engines() {
        let mut agg = WindowAggregator::new(opts(e, 1, 10, 10)).unwrap();
        // The designs treat the source as sorted and emit [0,10) at once; the others hold it (exact mode).
        let pushed = agg.push(&at(&[1, 2, 15]), 0).unwrap();
        let out = agg.close_source(0).unwrap();
        let rest = agg.flush().unwrap();
        let total = pushed.num_rows() + out.num_rows() + rest.num_rows();
        assert_eq!(total, 2, "{e:?}: windows [0,10) and [10,20)");
    }
}

#[test]
fn e02_a_silent_source_blocks_output_until_closed() {
    for e in engines() {
        let mut agg = WindowAggregator::new(opts(e, 2, 10, 10)).unwrap();
        assert_eq!(agg.push(&at(&[1, 50]), 0).unwrap().num_rows(), 0, "{e:?}");
        let out = agg.close_source(1).unwrap();
        assert_eq!(out.num_rows(), 1, "{e:?}: [0,10) once source 1 is closed");
        assert_eq!(agg.flush().unwrap().num_rows(), 1);
    }
}

#[test]
fn e03_equal_ts_same_key_first_goes_to_the_lower_source() {
    let out = agree(|e| {
        whole(
            e,
            10,
            10,
            &[
                rows(&[5], &[Some(1)], &[Some(10.0)]),
                rows(&[5], &[Some(1)], &[Some(20.0)]),
            ],
        )
    });
    assert_eq!(col_f64(&out, "first_v"), vec![Some(10.0)]);
    assert_eq!(col_f64(&out, "last_v"), vec![Some(20.0)]);
}

#[test]
fn e04_equal_ts_in_one_source_by_arrival() {
    let out = agree(|e| {
        whole(
            e,
            10,
            10,
            &[rows(
                &[5, 5, 5],
                &[Some(1); 3],
                &[Some(1.0), Some(2.0), Some(3.0)],
            )],
        )
    });
    assert_eq!(col_f64(&out, "first_v"), vec![Some(1.0)]);
    assert_eq!(col_f64(&out, "last_v"), vec![Some(3.0)]);
}

#[test]
fn e05_a_reading_on_two_sources_counts_twice() {
    let out = agree(|e| whole(e, 10, 10, &[at(&[3]), at(&[3])]));
    assert_eq!(col_i64(&out, "count"), vec![2]);
}

#[test]
fn e06_a_stall_halts_output_at_the_frontier_and_resumes() {
    for e in engines() {
        let mut agg = WindowAggregator::new(opts(e, 2, 10, 10)).unwrap();
        agg.push(&at(&[1, 12]), 1).unwrap();
        let mut emitted = 0;
        for i in 0..50 {
            // Source 0 runs ahead; source 1 stalls at 12: only [0,10) may come out.
            emitted += agg.push(&at(&[i * 10 + 1]), 0).unwrap().num_rows();
        }
        assert_eq!(emitted, 1, "{e:?}");
        let resumed = agg.push(&at(&[1000]), 1).unwrap().num_rows();
        assert_eq!(
            resumed, 48,
            "{e:?}: the windows [10,20) .. [480,490) of source 0"
        );
    }
}

#[test]
fn e07_flush_emits_every_open_window_in_order() {
    for e in engines() {
        let mut agg = WindowAggregator::new(opts(e, 2, 10, 5)).unwrap();
        agg.push(&at(&[1, 7, 13]), 0).unwrap();
        agg.push(&at(&[2, 21]), 1).unwrap();
        let mut outs = vec![agg.flush().unwrap()];
        outs.insert(0, RecordBatch::new_empty(outs[0].schema()));
        let starts = col_i64(
            &concat_batches(&outs[0].schema(), &outs).unwrap(),
            "window_start",
        );
        let mut sorted = starts.clone();
        sorted.sort();
        assert_eq!(starts, sorted, "{e:?}");
        assert_eq!(*starts.last().unwrap(), 20);
    }
}

#[test]
fn e08_empty_input_and_empty_batches() {
    let out = agree(|e| whole(e, 10, 10, &[at(&[]), at(&[])]));
    assert_eq!(out.num_rows(), 0);
    assert_eq!(out.schema().field(0).name(), "k");
    for e in engines() {
        let mut agg = WindowAggregator::new(opts(e, 2, 10, 10)).unwrap();
        agg.push(&at(&[]), 0).unwrap();
        agg.push(&at(&[4]), 1).unwrap();
        agg.push(&at(&[]), 1).unwrap();
        assert_eq!(agg.flush().unwrap().num_rows(), 1, "{e:?}");
    }
}

#[test]
fn e09_window_bounds_are_half_open() {
    let out = agree(|e| whole(e, 10, 5, &[at(&[5]), at(&[15])]));
    // ts 5 is in [0,10) and [5,15); ts 15 in [10,20) and [15,25), not in [5,15).
    assert_eq!(col_i64(&out, "window_start"), vec![0, 5, 10, 15]);
    assert_eq!(col_i64(&out, "count"), vec![1, 1, 1, 1]);
}

#[test]
fn e10_negative_timestamps() {
    let out = agree(|e| whole(e, 10, 5, &[at(&[-7, -1]), at(&[-6, 3])]));
    assert_eq!(col_i64(&out, "window_start"), vec![-15, -10, -5, 0]);
}

#[test]
fn e11_window_end_overflow_is_a_named_error() {
    for e in engines() {
        let mut agg = WindowAggregator::new(opts(e, 1, 10, 10)).unwrap();
        let err = agg.push(&at(&[i64::MAX - 3]), 0).unwrap_err();
        assert!(err.message().contains("'ts'"), "{e:?}: {err}");
    }
}

#[test]
fn e12_tumbling_one_window_per_row() {
    let out = agree(|e| whole(e, 10, 10, &[at(&[1, 11, 21]), at(&[2, 12])]));
    assert_eq!(col_i64(&out, "count"), vec![2, 2, 1]);
}

#[test]
fn e13_size_not_a_multiple_of_slide() {
    let out = agree(|e| whole(e, 10, 3, &[at(&[9]), at(&[10])]));
    // ts 9: windows starting 0, 3, 6, 9; ts 10: 3, 6, 9.
    assert_eq!(col_i64(&out, "window_start"), vec![0, 3, 6, 9]);
    assert_eq!(col_i64(&out, "count"), vec![1, 2, 2, 2]);
}

#[test]
fn e14_slide_above_size_is_rejected() {
    for e in engines() {
        assert!(WindowAggregator::new(opts(e, 2, 5, 10)).is_err(), "{e:?}");
    }
}

#[test]
fn e15_tumlmc_without_groups_or_with_more_updaters_than_keys() {
    for threads in [1, 4] {
        let run = |e: Strategy, by: bool| {
            let mut o = opts(e, 3, 10, 5);
            o.threads = Some(threads);
            if !by {
                o.by.clear();
            }
            let inputs = [at(&[1, 7, 30]), at(&[2, 11]), at(&[40])]
                .into_iter()
                .map(|b| (b.schema(), vec![Ok(b)]))
                .collect();
            let wg = window_aggregate(inputs, o, || Ok(())).unwrap();
            let (schema, outs) = (wg.schema, wg.batches);
            concat_batches(&schema, &outs).unwrap()
        };
        for by in [false, true] {
            assert_eq!(
                run(Strategy::TuMlMc, by),
                run(Strategy::Reference, by),
                "{threads} {by}"
            );
        }
    }
}

#[test]
fn e16_null_keys_are_a_group_sorted_first() {
    let out = agree(|e| {
        whole(
            e,
            10,
            10,
            &[
                rows(&[1, 2], &[Some(2), None], &[Some(1.0), Some(1.0)]),
                rows(&[1], &[None], &[Some(1.0)]),
            ],
        )
    });
    let k = out.column_by_name("k").unwrap();
    assert!(k.is_null(0) && !k.is_null(1));
    assert_eq!(col_i64(&out, "count"), vec![2, 1]);
}

#[test]
fn e17_many_keys_seen_once_and_one_hot_key() {
    let n = if cfg!(debug_assertions) {
        5_000
    } else {
        100_000
    };
    let ts: Vec<i64> = (0..n as i64).map(|i| i / 50).collect();
    let k: Vec<Option<i32>> = (0..n as i32)
        .map(|i| Some(if i % 10 == 0 { i } else { 0 }))
        .collect();
    let v: Vec<Option<f64>> = (0..n).map(|i| Some(i as f64)).collect();
    let half = n / 2;
    let a = rows(&ts[..half], &k[..half], &v[..half]);
    let b = rows(&ts[half..], &k[half..], &v[half..]);
    agree(|e| whole(e, 20, 10, &[a.clone(), b.clone()]));
}

#[test]
fn e18_time_gaps_make_no_empty_windows() {
    let out = agree(|e| whole(e, 10, 5, &[at(&[1, 1_000_000]), at(&[2, 2_000_000])]));
    assert_eq!(out.num_rows(), 6);
    assert!(col_i64(&out, "count").iter().all(|&c| c >= 1));
}

#[test]
fn e19_a_source_far_ahead_is_refused_until_the_slow_one_catches_up() {
    use windgate_core::ErrorKind;
    for e in engines() {
        let mut o = opts(e, 2, 10, 10);
        o.credits = Some(100);
        let mut agg = WindowAggregator::new(o).unwrap();
        let mut out = vec![];
        // Source 0 runs ahead 1000x faster; source 1 sends one row now and then.
        let mut fast = 0i64;
        let mut slow = 0i64;
        let mut refused = 0;
        while fast < 20_000 {
            let batch = at(&(fast..fast + 40).collect::<Vec<_>>());
            match agg.push(&batch, 0) {
                Ok(b) => {
                    out.push(b);
                    fast += 40;
                }
                Err(err) => {
                    assert_eq!(err.kind(), ErrorKind::Backpressure, "{e:?}: {err}");
                    assert!(err.message().contains("source(s) 1"), "{err}");
                    refused += 1;
                    // Memory stays bounded: at most the credits plus one batch pending.
                    assert!(agg.stats().pending_rows <= 140, "{e:?}");
                    slow += 1000;
                    out.push(agg.push(&at(&[slow]), 1).unwrap());
                }
            }
        }
        assert!(refused > 0, "{e:?}: credits never engaged");
        assert_eq!(agg.stats().backpressured, refused);
        out.push(agg.close_source(1).unwrap());
        out.push(agg.flush().unwrap());
        let got = concat_batches(&out[0].schema(), &out).unwrap();
        // Nothing lost: every row counted once.
        let total: i64 = col_i64(&got, "count").iter().sum();
        assert_eq!(total, 20_000 + refused as i64, "{e:?}");
    }
}

#[test]
fn e20_disorder_inside_a_source_is_a_named_error() {
    for e in [
        Strategy::Mq,
        Strategy::MqLf,
        Strategy::TuMlSc,
        Strategy::TuMlMc,
        Strategy::WiMl,
    ] {
        let mut agg = WindowAggregator::new(opts(e, 2, 10, 10)).unwrap();
        agg.push(&at(&[5]), 1).unwrap();
        let err = agg.push(&at(&[4]), 1).unwrap_err();
        assert!(
            err.message().contains("source 1 is not sorted"),
            "{e:?}: {err}"
        );
    }
}

#[test]
fn e21_cancelling_floats_are_exact_everywhere() {
    let out = agree(|e| {
        whole(
            e,
            10,
            10,
            &[
                rows(&[1], &[Some(1)], &[Some(1e16)]),
                rows(&[1], &[Some(1)], &[Some(1.0)]),
                rows(&[1], &[Some(1)], &[Some(-1e16)]),
            ],
        )
    });
    assert_eq!(col_f64(&out, "sum_v"), vec![Some(1.0)]);
}

#[test]
fn e22_nan_inf_and_nulls_in_mean() {
    let out = agree(|e| {
        whole(
            e,
            10,
            10,
            &[
                rows(&[1, 2], &[Some(1), Some(2)], &[Some(f64::NAN), None]),
                rows(
                    &[1, 2],
                    &[Some(1), Some(3)],
                    &[Some(1.0), Some(f64::INFINITY)],
                ),
            ],
        )
    });
    let mean = col_f64(&out, "mean_v");
    assert!(mean[0].unwrap().is_nan());
    assert_eq!(mean[1], None);
    assert_eq!(mean[2], Some(f64::INFINITY));
}

/// The rows split round-robin over `n` sources, streamed through `engine` (each source sorted by time),
/// optionally with `order_by = "id"`.
fn split_stream(engine: Strategy, n: usize, order_by: bool) -> RecordBatch {
    let total = 2000usize;
    let ts: Vec<i64> = (0..total as i64).map(|i| i / 10).collect();
    // Within each run of equal times, `id` runs backwards: the order it gives is not arrival order.
    let id: Vec<i64> = (0..total as i64)
        .map(|i| (i / 10) * 100 + (9 - i % 10))
        .collect();
    let k: Vec<i32> = (0..total as i32).map(|i| i % 7).collect();
    let v: Vec<f64> = (0..total).map(|i| i as f64).collect();
    let mut o = opts(engine, n, 10, 5);
    o.order_by = order_by.then(|| "id".to_string());
    let mut agg = WindowAggregator::new(o).unwrap();
    let mut out = vec![];
    for chunk in (0..total).collect::<Vec<_>>().chunks(100) {
        for s in 0..n {
            let rows: Vec<usize> = chunk.iter().copied().filter(|i| i % n == s).collect();
            let pick_i64 = |c: &[i64]| {
                Arc::new(Int64Array::from(
                    rows.iter().map(|&i| c[i]).collect::<Vec<_>>(),
                )) as ArrayRef
            };
            let batch = RecordBatch::try_from_iter([
                ("ts", pick_i64(&ts)),
                ("id", pick_i64(&id)),
                (
                    "k",
                    Arc::new(Int32Array::from(
                        rows.iter().map(|&i| k[i]).collect::<Vec<_>>(),
                    )) as ArrayRef,
                ),
                (
                    "v",
                    Arc::new(Float64Array::from(
                        rows.iter().map(|&i| v[i]).collect::<Vec<_>>(),
                    )) as ArrayRef,
                ),
            ])
            .unwrap();
            out.push(agg.push(&batch, s).unwrap());
        }
    }
    for s in 0..n {
        out.push(agg.close_source(s).unwrap());
    }
    out.push(agg.flush().unwrap());
    concat_batches(&out[0].schema(), &out).unwrap()
}

#[test]
fn e23_order_by_makes_the_split_into_sources_irrelevant() {
    for e in engines() {
        let one = split_stream(e, 1, true);
        for n in [2, 20] {
            assert_eq!(split_stream(e, n, true), one, "{e:?}, {n} sources");
        }
        // Window [-5, 5), key 0: rows 0 (id 9) and 7 (id 2) at time 0; `first` is the smaller id, row 7,
        // although row 0 arrived first.
        assert_eq!(col_f64(&one, "first_v")[0], Some(7.0), "{e:?}");
    }
    // Without order_by the split decides ties (source, then arrival): the check above is not vacuous.
    assert_ne!(
        split_stream(Strategy::Pane, 1, false),
        split_stream(Strategy::Pane, 2, false)
    );
}

#[test]
fn order_by_must_be_an_integer_column_without_nulls() {
    let mut o = opts(Strategy::Pane, 1, 10, 10);
    o.order_by = Some("v".into());
    let err = WindowAggregator::new(o)
        .unwrap()
        .push(&at(&[1]), 0)
        .unwrap_err();
    assert!(err.message().contains("order_by"), "{err}");
    let mut o = opts(Strategy::Pane, 1, 10, 10);
    o.order_by = Some("id".into());
    let batch = RecordBatch::try_from_iter([
        ("ts", Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef),
        (
            "id",
            Arc::new(Int64Array::from(vec![Some(1), None])) as ArrayRef,
        ),
        ("k", Arc::new(Int32Array::from(vec![1, 1])) as ArrayRef),
        (
            "v",
            Arc::new(Float64Array::from(vec![1.0, 2.0])) as ArrayRef,
        ),
    ])
    .unwrap();
    let err = WindowAggregator::new(o)
        .unwrap()
        .push(&batch, 0)
        .unwrap_err();
    assert!(err.message().contains("null at row 1"), "{err}");
}

#[test]
fn e24_unknown_source_and_schema_mismatch_are_named_errors() {
    for e in engines() {
        let mut agg = WindowAggregator::new(opts(e, 2, 10, 10)).unwrap();
        let err = agg.push(&at(&[1]), 2).unwrap_err();
        assert!(
            err.message().contains("source 2 does not exist"),
            "{e:?}: {err}"
        );
        agg.push(&at(&[1]), 0).unwrap();
        let bad = RecordBatch::try_from_iter([
            ("ts", Arc::new(Int64Array::from(vec![2])) as ArrayRef),
            ("k", Arc::new(Int64Array::from(vec![1])) as ArrayRef),
            ("v", Arc::new(Float64Array::from(vec![1.0])) as ArrayRef),
        ])
        .unwrap();
        let err = agg.push(&bad, 1).unwrap_err();
        assert!(err.message().contains("'k'"), "{e:?}: {err}");
        // Still usable.
        agg.push(&at(&[3]), 1).unwrap();
        assert_eq!(agg.flush().unwrap().num_rows(), 1);
    }
}

#[test]
fn e25_drop_while_workers_wait() {
    for e in [
        Strategy::Mq,
        Strategy::MqLf,
        Strategy::TuMlSc,
        Strategy::TuMlMc,
        Strategy::WiMl,
    ] {
        let mut agg = WindowAggregator::new(opts(e, 3, 10, 10)).unwrap();
        agg.push(&at(&[1, 2, 3]), 0).unwrap();
        agg.push(&at(&[5]), 2).unwrap();
        drop(agg); // source 1 never sent: the output thread waits; dropping must end every thread
    }
}

/// Each parallel strategy runs its own engine (a threaded one reports farm stats), not a fallback: a name
/// missing from the operator's dispatch once made tumlmc and wiml run the pane engine unnoticed.
#[test]
fn every_design_runs_its_own_engine() {
    for e in engines() {
        let mut agg = WindowAggregator::new(opts(e, 2, 10, 10)).unwrap();
        agg.push(&at(&[1, 2]), 0).unwrap();
        let threaded = !matches!(e, Strategy::Reference | Strategy::Pane);
        assert_eq!(agg.stats().farm.is_some(), threaded, "{e:?}");
    }
}
