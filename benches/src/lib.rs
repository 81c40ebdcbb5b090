//! Data generators and runners shared by the criterion benches.

use std::sync::Arc;

/// mimalloc, as in the Python extension (`windgate-py`): with glibc's allocator, buffers allocated by one
/// thread and freed by another (every farm and pipeline hand-off) contend on its arenas, and the benches would
/// measure a slower engine than users get.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use arrow_array::{Float64Array, Int32Array, RecordBatch, TimestampMillisecondArray};

/// A xorshift generator from a fixed seed: the benches' data is the same in every run.
pub fn xorshift() -> impl FnMut() -> u64 {
    let mut state = 0x9e3779b97f4a7c15u64;
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}

/// `rows` smart-grid-like rows, one per millisecond, `keys` plugs drawn by a xorshift generator, in batches of
/// `batch` rows. `disorder` shifts each row's time back by up to that many milliseconds (0: in order).
pub fn smartgrid_batches(rows: usize, keys: u32, batch: usize, disorder: i64) -> Vec<RecordBatch> {
    let mut next = xorshift();
    let mut out = Vec::with_capacity(rows.div_ceil(batch));
    let mut start = 0usize;
    while start < rows {
        let n = batch.min(rows - start);
        let ts: Vec<i64> = (start..start + n)
            .map(|i| {
                i as i64
                    - if disorder > 0 {
                        (next() % disorder as u64) as i64
                    } else {
                        0
                    }
            })
            .collect();
        let k: Vec<i32> = (0..n).map(|_| (next() % keys as u64) as i32).collect();
        let v: Vec<f64> = (0..n).map(|_| (next() % 10_000) as f64 * 0.01).collect();
        out.push(
            RecordBatch::try_from_iter([
                ("ts", Arc::new(TimestampMillisecondArray::from(ts)) as _),
                ("plug_id", Arc::new(Int32Array::from(k)) as _),
                ("value", Arc::new(Float64Array::from(v)) as _),
            ])
            .expect("valid batch"),
        );
        start += n;
    }
    out
}

/// Streams `batches` through a `WindowAggregator` with `opts` (push each, then flush); returns the rows out.
pub fn run_stream(
    batches: &[RecordBatch],
    opts: &windgate_core::aggregate::WindowAggregateOptions,
) -> usize {
    let mut agg =
        windgate_core::aggregate::WindowAggregator::new(opts.clone()).expect("valid options");
    let mut rows = 0;
    for b in batches {
        rows += agg.push(b, 0).expect("push").num_rows();
    }
    rows + agg.flush().expect("flush").num_rows()
}
