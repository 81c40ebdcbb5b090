//! Throughput of the pane farm against thread count, per pane-level query (PLQ) and window-level query (WLQ)
//! scheduler (the axes of Fig. 8 in Mencagli et al., *Parallel Continuous Preference Queries over Out-of-Order
//! and Bursty Data Streams*), next to the single-threaded pane engine, RRCPA and the line and ring baselines of
//! Beicht, *Disjoint Parallelization of Sliding-Window Streaming Aggregation*: 1k keys, size 60 s, slide 10 s,
//! count + sum + max, in order. `farm_long_windows`: the same stream with 288 panes a window (size 2880 s),
//! where the farm's window level builds windows in blocks, beside the pane engine's two stacks.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use windgate_benches::{run_stream, smartgrid_batches};
use windgate_core::aggregate::{
    FarmOptions, LatenessOpt, Span, Strategy, WindowAggregateOptions, window_aggregate,
    window_aggregate_in_memory,
};
use windgate_core::runtime::{PaneSchedulerKind, WindowSchedulerKind};

const ROWS: usize = 4_000_000;

fn options(strategy: Strategy, threads: usize, farm: FarmOptions) -> WindowAggregateOptions {
    sized("60s", strategy, threads, farm)
}

/// [`options`] with windows of `size`.
fn sized(
    size: &str,
    strategy: Strategy,
    threads: usize,
    farm: FarmOptions,
) -> WindowAggregateOptions {
    let aggs = vec![
        ("*".to_string(), vec!["count".to_string()]),
        (
            "value".to_string(),
            vec!["sum".to_string(), "max".to_string()],
        ),
    ];
    let mut o = WindowAggregateOptions::new("ts", Span::Text(size.into()), aggs);
    o.slide = Some(Span::Text("10s".into()));
    o.by = vec!["plug_id".into()];
    o.lateness = LatenessOpt::Bound(Span::Units(0));
    o.strategy = strategy;
    o.threads = Some(threads);
    o.farm = farm;
    o
}

/// The batch function: pushes do not wait for windows, so the stages overlap across batches.
fn run_batch(batches: &[arrow_array::RecordBatch], opts: &WindowAggregateOptions) -> usize {
    let schema = batches[0].schema();
    let input = batches.iter().cloned().map(Ok);
    let wg = window_aggregate(vec![(schema, input)], opts.clone(), || Ok(())).expect("runs");
    let out = wg.batches;
    out.iter().map(|b| b.num_rows()).sum()
}

fn farm(scheduler: PaneSchedulerKind, window_scheduler: WindowSchedulerKind) -> FarmOptions {
    FarmOptions {
        scheduler,
        window_scheduler,
        sample_interval: Duration::from_millis(100),
        ..FarmOptions::default()
    }
}

/// The batch function over in-memory input with its default `lateness=None` (what `windgate.window_aggregate`
/// does with a table): windows close as soon as no later row can reach them.
fn run_in_memory(batches: &[arrow_array::RecordBatch], opts: &WindowAggregateOptions) -> usize {
    let mut o = opts.clone();
    o.lateness = LatenessOpt::Exact;
    let input = vec![(batches[0].schema(), batches.to_vec())];
    let wg = window_aggregate_in_memory(input, o, || Ok(())).expect("runs");
    let out = wg.batches;
    out.iter().map(|b| b.num_rows()).sum()
}

fn bench_threads(c: &mut Criterion) {
    let mut g = c.benchmark_group("farm");
    g.sample_size(10);
    g.throughput(Throughput::Elements(ROWS as u64));
    let batches = smartgrid_batches(ROWS, 1000, 65_536, 0);
    let default = farm(PaneSchedulerKind::AsPid, WindowSchedulerKind::WinFb);
    g.bench_function("pane_1t", |b| {
        let o = options(Strategy::Pane, 1, default.clone());
        b.iter(|| black_box(run_stream(&batches, &o)))
    });
    for threads in [1, 2, 4] {
        g.bench_with_input(
            BenchmarkId::new("as_pid_win_fb", threads),
            &options(Strategy::Farm, threads, default.clone()),
            |b, o| b.iter(|| black_box(run_stream(&batches, o))),
        );
    }
    let others = [
        (
            "pb_rr_win_fb",
            farm(PaneSchedulerKind::PbRr, WindowSchedulerKind::WinFb),
        ),
        (
            "tb_rr_win_fb",
            farm(PaneSchedulerKind::TbRr, WindowSchedulerKind::WinFb),
        ),
        (
            "as_win_fb",
            farm(PaneSchedulerKind::As, WindowSchedulerKind::WinFb),
        ),
        (
            "as_pid_win_rr",
            farm(PaneSchedulerKind::AsPid, WindowSchedulerKind::WinRr),
        ),
    ];
    for (name, f) in others {
        g.bench_with_input(
            BenchmarkId::new(name, 2),
            &options(Strategy::Farm, 2, f),
            |b, o| b.iter(|| black_box(run_stream(&batches, o))),
        );
    }
    // The batch functions: streamed (`lateness=0`, pushes do not wait) and in memory (`lateness=None`).
    type Runner = fn(&[arrow_array::RecordBatch], &WindowAggregateOptions) -> usize;
    let batch_runs: [(&str, Strategy, usize, Runner); 7] = [
        ("batch_pane", Strategy::Pane, 1, run_batch),
        ("batch_farm", Strategy::Farm, 2, run_batch),
        ("batch_rrcpa", Strategy::Rrcpa, 2, run_batch),
        ("in_memory_pane", Strategy::Pane, 1, run_in_memory),
        ("in_memory_farm", Strategy::Farm, 1, run_in_memory),
        ("in_memory_farm", Strategy::Farm, 2, run_in_memory),
        ("in_memory_rrcpa", Strategy::Rrcpa, 2, run_in_memory),
    ];
    for (name, strategy, threads, run) in batch_runs {
        g.bench_with_input(
            BenchmarkId::new(name, threads),
            &options(strategy, threads, default.clone()),
            |b, o| b.iter(|| black_box(run(&batches, o))),
        );
    }
    g.bench_with_input(
        BenchmarkId::new("rrcpa", 2),
        &options(Strategy::Rrcpa, 2, default.clone()),
        |b, o| b.iter(|| black_box(run_stream(&batches, o))),
    );
    // The thesis' baselines without panes (6 window updates per row here): the line approaches HSA and RRA
    // and the ring approaches HOA and RRCA.
    for (name, strategy) in [
        ("hsa", Strategy::Hsa),
        ("rra", Strategy::Rra),
        ("hoa", Strategy::Hoa),
        ("rrca", Strategy::Rrca),
    ] {
        g.bench_with_input(
            BenchmarkId::new(name, 2),
            &options(strategy, 2, default.clone()),
            |b, o| b.iter(|| black_box(run_stream(&batches, o))),
        );
    }
    g.finish();
}

/// 288 panes a window: the farm's block window stage against the pane engine's two stacks.
fn bench_long_windows(c: &mut Criterion) {
    let mut g = c.benchmark_group("farm_long_windows");
    g.sample_size(10);
    g.throughput(Throughput::Elements(ROWS as u64));
    let batches = smartgrid_batches(ROWS, 1000, 65_536, 0);
    let default = farm(PaneSchedulerKind::AsPid, WindowSchedulerKind::WinFb);
    for (name, strategy, threads) in [
        ("pane", Strategy::Pane, 1),
        ("farm", Strategy::Farm, 1),
        ("farm", Strategy::Farm, 2),
    ] {
        g.bench_with_input(
            BenchmarkId::new(name, threads),
            &sized("2880s", strategy, threads, default.clone()),
            |b, o| b.iter(|| black_box(run_stream(&batches, o))),
        );
    }
    g.finish();
}

criterion_group!(benches, bench_threads, bench_long_windows);
criterion_main!(benches);
