//! Checkpoints: snapshot and restore time of a `WindowAggregator` against its open state (1k and 100k keys,
//! one open pane each, count + sum + max).

use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::Arc;

use arrow_array::{Float64Array, Int64Array, RecordBatch};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use windgate_core::aggregate::{LatenessOpt, Span, WindowAggregateOptions, WindowAggregator};

/// An operator holding `keys` keys of open state in one pane.
fn loaded(keys: usize) -> WindowAggregator {
    let aggs = vec![
        ("*".to_string(), vec!["count".to_string()]),
        ("v".to_string(), vec!["sum".to_string(), "max".to_string()]),
    ];
    let mut o = WindowAggregateOptions::new("ts", Span::Units(60), aggs);
    o.slide = Some(Span::Units(10));
    o.by = vec!["k".into()];
    o.lateness = LatenessOpt::Bound(Span::Units(5));
    let mut agg = WindowAggregator::new(o).unwrap();
    let n = keys as i64;
    let batch = RecordBatch::try_from_iter([
        (
            "ts",
            Arc::new(Int64Array::from_iter_values((0..n).map(|i| i % 5))) as _,
        ),
        ("k", Arc::new(Int64Array::from_iter_values(0..n)) as _),
        (
            "v",
            Arc::new(Float64Array::from_iter_values(
                (0..n).map(|i| i as f64 * 0.5),
            )) as _,
        ),
    ])
    .unwrap();
    agg.push(&batch, 0).unwrap();
    agg
}

fn bench_snapshot(c: &mut Criterion) {
    let mut g = c.benchmark_group("snapshot");
    g.sample_size(10);
    for keys in [1_000, 100_000] {
        let mut agg = loaded(keys);
        let data = agg.snapshot(&BTreeMap::new()).unwrap();
        g.throughput(Throughput::Elements(keys as u64));
        g.bench_function(BenchmarkId::new("write", keys), |b| {
            b.iter(|| black_box(agg.snapshot(&BTreeMap::new()).unwrap()))
        });
        g.bench_function(BenchmarkId::new("restore", keys), |b| {
            b.iter(|| black_box(WindowAggregator::restore(&data, None).unwrap()))
        });
    }
    g.finish();
}

criterion_group!(benches, bench_snapshot);
criterion_main!(benches);
