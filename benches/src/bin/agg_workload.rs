//! A fixed window-aggregation workload for instruction counts (`valgrind --tool=callgrind`): the pane engine on
//! one thread, 2M rows, 1k keys, 60 s windows sliding by 10 s. Prints the output rows and a hash of the output,
//! so two builds can be checked for identical results as well as compared for cost.
//!
//! `cargo run --release -p windgate-benches --bin agg_workload -- [count_sum_max|moments|ints]`; under callgrind
//! add `--toggle-collect=*aggregate_all*` to count only the aggregation, not the data generation.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch, cast::AsArray, types::Float64Type};
use windgate_benches::smartgrid_batches;
use windgate_core::aggregate::{
    LatenessOpt, Span, Strategy, WindowAggregateOptions, WindowAggregator,
};

const ROWS: usize = 2_000_000;

/// `batches` with the float `value` column replaced by an int64 one (the value times 100).
fn with_int_values(batches: Vec<RecordBatch>) -> Vec<RecordBatch> {
    batches
        .into_iter()
        .map(|b| {
            let v = b.column(2).as_primitive::<Float64Type>();
            let ints: ArrayRef = Arc::new(Int64Array::from_iter_values(
                v.values().iter().map(|x| (x * 100.0) as i64),
            ));
            RecordBatch::try_from_iter([
                ("ts", b.column(0).clone()),
                ("plug_id", b.column(1).clone()),
                ("value", ints),
            ])
            .expect("valid batch")
        })
        .collect()
}

#[inline(never)]
fn aggregate_all(batches: &[RecordBatch], opts: &WindowAggregateOptions) -> Vec<RecordBatch> {
    let mut agg = WindowAggregator::new(opts.clone()).expect("valid options");
    let mut out: Vec<RecordBatch> = batches
        .iter()
        .map(|b| agg.push(b, 0).expect("push"))
        .collect();
    out.push(agg.flush().expect("flush"));
    out
}

fn main() {
    let which = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "count_sum_max".into());
    let aggs: Vec<(&str, Vec<&str>)> = match which.as_str() {
        "count_sum_max" => vec![("*", vec!["count"]), ("value", vec!["sum", "max"])],
        "moments" | "ints" => vec![("value", vec!["mean", "std", "min", "max", "first", "last"])],
        other => panic!("unknown workload {other:?}"),
    };
    let mut batches = smartgrid_batches(ROWS, 1000, 65_536, 0);
    if which == "ints" {
        batches = with_int_values(batches);
    }
    let aggs = aggs
        .into_iter()
        .map(|(c, f)| (c.to_string(), f.into_iter().map(String::from).collect()))
        .collect();
    let mut o = WindowAggregateOptions::new("ts", Span::Text("60s".into()), aggs);
    o.slide = Some(Span::Text("10s".into()));
    o.by = vec!["plug_id".into()];
    o.lateness = LatenessOpt::Bound(Span::Units(0));
    o.strategy = Strategy::Pane;
    o.threads = Some(1);
    let out = aggregate_all(&batches, &o);
    let mut h = DefaultHasher::new();
    let mut rows = 0;
    for b in &out {
        rows += b.num_rows();
        for c in b.columns() {
            format!("{c:?}").hash(&mut h);
        }
    }
    println!("{which}: {rows} rows, output hash {:016x}", h.finish());
}
