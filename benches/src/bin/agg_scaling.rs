//! One window-aggregation run for profiling and quick scaling checks: random (or regular) keys, random doubles,
//! times one per millisecond, through the batch function on input in memory (what `window_aggregate` on a table
//! runs). Prints rows/s; `perf stat` or callgrind around it give the cost per row.
//!
//! `cargo run --release -p windgate-benches --bin agg_scaling -- ROWS KEYS ROWS_PER_PANE PANES_PER_WINDOW AGGS THREADS STRATEGY ORDER`
//! with `AGGS` one of `count`, `csm` (count+sum+max), `six` (mean+std+min+max+first+last), `ORDER` `random` or
//! `regular`, `STRATEGY` a strategy name (`auto`, `pane`, `farm`, ...), then `REPEAT` and `DISORDER` (each
//! row's time moved back by up to this many milliseconds, a stream's bounded disorder). Missing arguments take
//! the defaults `8000000 1000 10000 6 csm 1 auto random 3 0`. With `EACH` set in the environment, every run's
//! rows/s goes to stderr as well (the spread of a noisy machine, which the best of the runs hides).

use std::sync::Arc;
use std::time::Instant;

use arrow_array::{Float64Array, Int64Array, RecordBatch, TimestampMillisecondArray};
use windgate_core::aggregate::{
    Span, Strategy, WindowAggregateOptions, window_aggregate_in_memory,
};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, d: &str| args.get(i).cloned().unwrap_or_else(|| d.to_string());
    let rows: usize = arg(0, "8000000").parse().expect("ROWS");
    let keys: u64 = arg(1, "1000").parse().expect("KEYS");
    let per_pane: i64 = arg(2, "10000").parse().expect("ROWS_PER_PANE");
    let ppw: i64 = arg(3, "6").parse().expect("PANES_PER_WINDOW");
    let aggs = arg(4, "csm");
    let threads: usize = arg(5, "1").parse().expect("THREADS");
    let strategy = Strategy::parse(&arg(6, "auto")).expect("STRATEGY");
    let regular = arg(7, "random") == "regular";
    let repeat: usize = arg(8, "3").parse().expect("REPEAT");
    let disorder: u64 = arg(9, "0").parse().expect("DISORDER");

    let mut next = windgate_benches::xorshift();
    let ts: Vec<i64> = (0..rows as i64)
        .map(|t| t - (next() % (disorder + 1)) as i64)
        .collect();
    let k: Vec<i64> = (0..rows as u64)
        .map(|i| if regular { i % keys } else { next() % keys } as i64)
        .collect();
    let v: Vec<f64> = (0..rows)
        .map(|_| (next() >> 11) as f64 / (1u64 << 53) as f64 * 1000.0)
        .collect();
    let batch = RecordBatch::try_from_iter([
        ("ts", Arc::new(TimestampMillisecondArray::from(ts)) as _),
        ("key", Arc::new(Int64Array::from(k)) as _),
        ("value", Arc::new(Float64Array::from(v)) as _),
    ])
    .expect("batch");
    let aggs: Vec<(String, Vec<String>)> = match aggs.as_str() {
        "count" => vec![("*".into(), vec!["count".into()])],
        "csm" => vec![
            ("*".into(), vec!["count".into()]),
            ("value".into(), vec!["sum".into(), "max".into()]),
        ],
        "six" => vec![(
            "value".into(),
            ["mean", "std", "min", "max", "first", "last"]
                .map(String::from)
                .to_vec(),
        )],
        other => panic!("unknown AGGS {other:?}"),
    };
    let mut opts =
        WindowAggregateOptions::new("ts", Span::Text(format!("{}ms", per_pane * ppw)), aggs);
    opts.slide = Some(Span::Text(format!("{per_pane}ms")));
    opts.by = vec!["key".into()];
    opts.strategy = strategy;
    opts.threads = Some(threads);
    let mut best = f64::MAX;
    let mut out_rows = 0;
    for _ in 0..repeat {
        let t = Instant::now();
        let wg = window_aggregate_in_memory(
            vec![(batch.schema(), vec![batch.clone()])],
            opts.clone(),
            || Ok(()),
        )
        .expect("aggregate");
        let out = wg.batches;
        best = best.min(t.elapsed().as_secs_f64());
        if std::env::var_os("EACH").is_some() {
            eprint!("{:.0} ", rows as f64 / t.elapsed().as_secs_f64() / 1e6);
        }
        out_rows = out.iter().map(|b| b.num_rows()).sum::<usize>();
    }
    println!(
        "rows={rows} keys={keys} per_pane={per_pane} ppw={ppw} threads={threads} out={out_rows} best={best:.3}s {:.1} M rows/s",
        rows as f64 / best / 1e6
    );
}
