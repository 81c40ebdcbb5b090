//! Throughput of the streaming window aggregator (single thread): 1k keys, size 60 s, slide 10 s.

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use windgate_benches::{run_stream, smartgrid_batches};
use windgate_core::aggregate::{LatenessOpt, Span, Strategy, WindowAggregateOptions};
use windgate_core::exact_sum::ExactSum;

const ROWS: usize = 4_000_000;

/// `(column, functions)` pairs of a query.
type Aggs<'a> = &'a [(&'a str, &'a [&'a str])];

fn options(aggs: Aggs<'_>, lateness: i64) -> WindowAggregateOptions {
    let aggs = aggs
        .iter()
        .map(|(c, f)| (c.to_string(), f.iter().map(|s| s.to_string()).collect()))
        .collect();
    let mut o = WindowAggregateOptions::new("ts", Span::Text("60s".into()), aggs);
    o.slide = Some(Span::Text("10s".into()));
    o.by = vec!["plug_id".into()];
    o.lateness = LatenessOpt::Bound(Span::Units(lateness));
    o.strategy = Strategy::Auto;
    o
}

fn bench_aggregator(c: &mut Criterion) {
    let mut g = c.benchmark_group("window_aggregate");
    g.sample_size(10);
    g.throughput(Throughput::Elements(ROWS as u64));
    let in_order = smartgrid_batches(ROWS, 1000, 65_536, 0);
    let disordered = smartgrid_batches(ROWS, 1000, 65_536, 2_000);
    let cases: [(&str, Aggs<'_>); 3] = [
        ("count", &[("*", &["count"])]),
        ("count_sum", &[("*", &["count"]), ("value", &["sum"])]),
        (
            "count_sum_max",
            &[("*", &["count"]), ("value", &["sum", "max"])],
        ),
    ];
    for (name, aggs) in cases {
        g.bench_with_input(
            BenchmarkId::new("in_order", name),
            &options(aggs, 0),
            |b, o| b.iter(|| black_box(run_stream(&in_order, o))),
        );
        g.bench_with_input(
            BenchmarkId::new("disorder_2s", name),
            &options(aggs, 2_000),
            |b, o| b.iter(|| black_box(run_stream(&disordered, o))),
        );
    }
    g.finish();
}

fn bench_exact_sum(c: &mut Criterion) {
    let values: Vec<f64> = (0..1_000_000)
        .map(|i| (i % 10_000) as f64 * 0.01 + 0.001)
        .collect();
    let mut g = c.benchmark_group("exact_sum");
    g.throughput(Throughput::Elements(values.len() as u64));
    g.bench_function("add_1M", |b| {
        b.iter(|| {
            let mut s = ExactSum::new();
            values.iter().for_each(|&v| s.add(v));
            black_box(s.value())
        })
    });
    g.bench_function("naive_f64_1M", |b| {
        b.iter(|| black_box(values.iter().sum::<f64>()))
    });
    g.finish();
}

criterion_group!(benches, bench_aggregator, bench_exact_sum);
criterion_main!(benches);
