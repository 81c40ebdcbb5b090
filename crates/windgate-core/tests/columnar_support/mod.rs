//! Shared pieces of the columnar pipeline tests: the option grid (threads x scheduler x reorder x
//! partitioning), batch cuts, runners, and rows as strings for exact comparison.

#![allow(dead_code)]

use std::time::Duration;

use arrow_array::RecordBatch;
use arrow_cast::display::{ArrayFormatter, FormatOptions};
use arrow_schema::SchemaRef;
use proptest::prelude::*;
use windgate_core::Result;
use windgate_core::columnar::{ColumnarPipeline, RunMode};
use windgate_core::runtime::pipeline::{
    Partitioning, PipelineOptions, ReorderScheme, SchedulerPolicy,
};

pub const THREADS: [usize; 5] = [1, 2, 3, 4, 8];
pub const SCHEDULERS: [SchedulerPolicy; 5] = [
    SchedulerPolicy::Ct,
    SchedulerPolicy::CtInput,
    SchedulerPolicy::Lp,
    SchedulerPolicy::Qst,
    SchedulerPolicy::Et,
];
pub const REORDERS: [ReorderScheme; 2] = [ReorderScheme::NonBlocking, ReorderScheme::Locked];
pub const PARTITIONINGS: [Partitioning; 2] = [Partitioning::Hybrid, Partitioning::Partitioned];

pub fn options(
    threads: usize,
    scheduler: SchedulerPolicy,
    reorder: ReorderScheme,
    partitioning: Partitioning,
    reorder_slots: usize,
) -> PipelineOptions {
    PipelineOptions {
        threads,
        scheduler,
        reorder,
        partitioning,
        reorder_slots,
        time_slice: Duration::from_micros(50),
        ct_window: Duration::from_millis(2),
        qst_capacity: 16,
        marker_every: 7,
        max_pending: 8,
    }
}

/// Every combination of the four choices (200 option sets).
pub fn grid() -> Vec<PipelineOptions> {
    let mut out = Vec::new();
    for &t in &THREADS {
        for &s in &SCHEDULERS {
            for &r in &REORDERS {
                for &p in &PARTITIONINGS {
                    out.push(options(t, s, r, p, [1, 2, 1024][out.len() % 3]));
                }
            }
        }
    }
    out
}

pub fn any_options() -> impl Strategy<Value = PipelineOptions> {
    (
        prop::sample::select(THREADS.to_vec()),
        prop::sample::select(SCHEDULERS.to_vec()),
        prop::sample::select(REORDERS.to_vec()),
        prop::sample::select(PARTITIONINGS.to_vec()),
        prop::sample::select(vec![1usize, 2, 4, 1024]),
    )
        .prop_map(|(t, s, r, p, slots)| options(t, s, r, p, slots))
}

/// `batch` cut at the given positions (taken modulo its length, sorted, deduplicated).
pub fn cut(batch: &RecordBatch, cuts: &[usize]) -> Vec<RecordBatch> {
    let n = batch.num_rows();
    if n == 0 {
        return vec![batch.clone()];
    }
    let mut at: Vec<usize> = cuts.iter().map(|c| c % n).filter(|c| *c > 0).collect();
    at.sort_unstable();
    at.dedup();
    at.push(n);
    let mut start = 0;
    at.into_iter()
        .map(|end| {
            let b = batch.slice(start, end - start);
            start = end;
            b
        })
        .collect()
}

/// Each row as `a|b|c` (exact: floats print their shortest round-trip form).
pub fn rows_of(batches: &[RecordBatch]) -> Vec<String> {
    let opts = FormatOptions::default().with_null("null");
    let mut out = Vec::new();
    for b in batches {
        let fmts: Vec<_> = b
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &opts).unwrap())
            .collect();
        for i in 0..b.num_rows() {
            out.push(
                fmts.iter()
                    .map(|f| f.value(i).to_string())
                    .collect::<Vec<_>>()
                    .join("|"),
            );
        }
    }
    out
}

/// Runs `pipeline` over `batches` (chunks of `chunk_rows`) and returns the rows.
pub fn run(
    pipeline: &ColumnarPipeline,
    schema: &SchemaRef,
    batches: Vec<RecordBatch>,
    mode: &RunMode,
    chunk_rows: usize,
) -> Result<Vec<String>> {
    let out = pipeline.run_with(
        schema.clone(),
        batches.into_iter().map(Ok),
        mode,
        chunk_rows,
        &mut || Ok(()),
    )?;
    assert_eq!(
        out.rows_out as usize,
        out.batches.iter().map(|b| b.num_rows()).sum::<usize>()
    );
    for b in &out.batches {
        assert_eq!(
            b.schema().fields(),
            out.schema.fields(),
            "output batches have the output schema"
        );
    }
    Ok(rows_of(&out.batches))
}

pub fn sequential(
    pipeline: &ColumnarPipeline,
    schema: &SchemaRef,
    batches: Vec<RecordBatch>,
) -> Result<Vec<String>> {
    run(pipeline, schema, batches, &RunMode::Sequential, usize::MAX)
}

pub fn parallel(
    pipeline: &ColumnarPipeline,
    schema: &SchemaRef,
    batches: Vec<RecordBatch>,
    options: &PipelineOptions,
    chunk_rows: usize,
) -> Result<Vec<String>> {
    run(
        pipeline,
        schema,
        batches,
        &RunMode::Parallel(options.clone()),
        chunk_rows,
    )
}

/// Errors compare by kind and message.
pub fn same<T: PartialEq + std::fmt::Debug>(a: &Result<T>, b: &Result<T>) -> bool {
    match (a, b) {
        (Ok(x), Ok(y)) => x == y,
        (Err(x), Err(y)) => x.kind() == y.kind(),
        _ => false,
    }
}

/// Rust's `{:?}` for f64 and Arrow's display differ in form (`2.0` vs `2`, `1e-5` vs `0.00001`), not in
/// value: print every float field Rust's way.
pub fn norm(rows: Vec<String>) -> Vec<String> {
    let field = |f: &str| match f.parse::<f64>() {
        Ok(x) if f.contains(['.', 'e']) => format!("{x:?}").trim_end_matches(".0").to_string(),
        _ => f.to_string(),
    };
    rows.into_iter()
        .map(|r| r.split('|').map(field).collect::<Vec<_>>().join("|"))
        .collect()
}
