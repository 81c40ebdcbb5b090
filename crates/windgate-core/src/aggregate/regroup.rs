//! Scattered in-memory input regrouped by pane before the batch function runs it.
//!
//! Why: the pane engine looks a pane up once per run of rows within one pane. Rows in random time order make
//! every run one row long: a 4 M-row table shuffled ran at 3.6 M rows/s on one thread against 83 M in time
//! order. A stable counting sort by pane (two passes and a gather) makes every pane one run again.
//!
//! The same rows, bit for bit: the sort is stable, so the rows of a pane keep their order, and every window
//! gets the same rows; exact combines do not see the order, and `first`/`last` compare arrival only between
//! rows of one time (the order is `(ts, by, source, seq)`), which share a pane. Only plain windows are
//! regrouped (no partial states, which keep the rows' arrival numbers; no lateness bound, whose late rows
//! depend on the arrival order; no update modes or calendars).

use arrow_array::{Array, ArrayRef, RecordBatch, UInt32Array};
use arrow_buffer::ScalarBuffer;
use arrow_schema::{ArrowError, SchemaRef};
use arrow_select::interleave::interleave;
use arrow_select::take::take;

use super::batch::Tuning;
use super::options::WindowAggregateOptions;
use super::ranges::{eligible, grid, time_columns};
use crate::error::Result;
use crate::order::kslack::LatenessOpt;
use crate::threads::{MAX_THREADS, resolve_threads};
use crate::time::WindowSpec;

/// Rows probed for pane runs at each of [`PROBES`] places.
const PROBE_ROWS: usize = 256;
/// Places probed, spread evenly over the input.
const PROBES: usize = 64;
/// Input is regrouped when the probed rows number fewer than this many per run that grouping by pane would
/// save (runs within one pane beyond one a pane). The pane engine gathers short runs by pane (see
/// `pane_runs::SHORT_RUN`), some 300 instructions a run on top of its cost a row; the regroup costs some 6 ns
/// a row (a 4M-row table: ~25 ms to order and gather), which only scattered input's runs repay: rows late by
/// up to 2 or 5 s against 10 s panes (a run every 5 to 10 rows) ran at 58 and 50 M rows/s on one thread left
/// as they are, 50 and 47 M regrouped (65.7 M regrouped on two threads, 98 and 90 M cut into time ranges by
/// scans); shuffled rows (a run a row) still take the regroup (31 M on one thread).
const MIN_RUN: usize = 4;
/// Panes (between the least and the greatest) per input row beyond which the counting sort's table would
/// outgrow the input: such input is left as it is.
const MAX_PANES_PER_ROW: usize = 4;

/// The rows of `sources` grouped by pane, each pane's rows in their order, if the call allows it (one source,
/// plain windows, as `ranges::eligible` says, no lateness bound) and the input is scattered over panes;
/// `None` otherwise. `on_batch` (Ctrl-C) is checked between the steps, each a pass over the rows.
pub(super) fn regroup(
    sources: &[(SchemaRef, Vec<RecordBatch>)],
    opts: &WindowAggregateOptions,
    tuning: Tuning,
    on_batch: &mut dyn FnMut() -> Result<()>,
) -> Result<Option<Vec<RecordBatch>>> {
    let [(schema, batches)] = sources else {
        return Ok(None);
    };
    let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
    // Under a lateness bound the arrival order decides which rows are late: it must stay as it is.
    let exact = matches!(opts.lateness, LatenessOpt::Exact);
    if !exact || !eligible(opts) || rows < tuning.split_min_rows.max(2) || rows > u32::MAX as usize
    {
        return Ok(None);
    }
    let (Some(spec), Some(times)) = (grid(schema, opts), time_columns(batches, &opts.time)) else {
        return Ok(None);
    };
    if !scattered(&times, &spec) {
        return Ok(None);
    }
    on_batch()?;
    let Some(order) = by_pane(&times, &spec, rows) else {
        return Ok(None);
    };
    on_batch()?;
    let threads = resolve_threads(opts.threads).min(MAX_THREADS);
    Ok(gather(schema, batches, &times, order, threads))
}

/// Whether grouping the rows by pane would save many runs (see [`MIN_RUN`]): the runs the probes see, scaled
/// to the input, against one run a pane over the panes the times span. Sorted input, or input whose disorder
/// stays within panes, has about one run a pane already, however short its panes.
fn scattered(times: &[ScalarBuffer<i64>], spec: &WindowSpec) -> bool {
    let (mut probed, mut runs) = (0usize, 0usize);
    for t in times.iter().filter(|t| !t.is_empty()) {
        let places = (t.len() / PROBE_ROWS).clamp(1, PROBES);
        for p in 0..places {
            let from = p * t.len() / places;
            let part = &t[from..(from + PROBE_ROWS).min(t.len())];
            let Some(panes) = part
                .iter()
                .map(|&ts| pane(spec, ts))
                .collect::<Option<Vec<_>>>()
            else {
                return false;
            };
            probed += panes.len();
            runs += 1 + panes.windows(2).filter(|w| w[0] != w[1]).count();
        }
    }
    let rows: usize = times.iter().map(|t| t.len()).sum();
    let runs = rows as f64 * runs as f64 / probed.max(1) as f64;
    // Few runs in all: nothing to save, whatever the panes (the common case, sorted input, stops here
    // without a pass over the times).
    if runs * MIN_RUN as f64 <= rows as f64 {
        return false;
    }
    let Some((least, greatest)) = (times.iter())
        .filter_map(|t| crate::prefetch::min_max(t))
        .reduce(|(a, b), (c, d)| (a.min(c), b.max(d)))
    else {
        return false;
    };
    let (Some(lo), Some(hi)) = (pane(spec, least), pane(spec, greatest)) else {
        return false;
    };
    let panes = hi.saturating_sub(lo).saturating_add(1) as f64;
    (runs - panes) * MIN_RUN as f64 > rows as f64
}

/// The pane of `ts`, `None` where `ts - offset` leaves the i64 range (such input keeps its order).
fn pane(spec: &WindowSpec, ts: i64) -> Option<i64> {
    Some(ts.checked_sub(spec.offset())?.div_euclid(spec.pane()))
}

/// The rows' order grouped by pane (a stable counting sort), numbered across batches; `None` when the panes
/// spread too far ([`MAX_PANES_PER_ROW`]).
fn by_pane(times: &[ScalarBuffer<i64>], spec: &WindowSpec, rows: usize) -> Option<Vec<u32>> {
    let panes: Vec<i64> = (times.iter().flat_map(|t| t.iter()))
        .map(|&ts| pane(spec, ts))
        .collect::<Option<_>>()?;
    let (lo, hi) = (*panes.iter().min()?, *panes.iter().max()?);
    let span = usize::try_from(hi.checked_sub(lo)?).ok()?.checked_add(1)?;
    if span > rows.saturating_mul(MAX_PANES_PER_ROW) {
        return None;
    }
    // starts[p]: where pane p's rows begin in the new order.
    let mut starts = vec![0u32; span + 1];
    for &p in &panes {
        starts[(p - lo) as usize + 1] += 1;
    }
    for i in 1..starts.len() {
        starts[i] += starts[i - 1];
    }
    let mut order = vec![0u32; rows];
    for (row, &p) in panes.iter().enumerate() {
        let at = &mut starts[(p - lo) as usize];
        order[*at as usize] = row as u32;
        *at += 1;
    }
    Some(order)
}

/// The rows of `batches` in `order` (numbered across batches), as one batch of the source's `schema` (a
/// batch's own schema may say a column without nulls is not nullable); `None` when the batches do not match
/// the schema or Arrow cannot gather a column (a string column past 2 GiB in one array): the input then
/// runs as it is, and the usual path reports what is wrong with it.
fn gather(
    schema: &SchemaRef,
    batches: &[RecordBatch],
    times: &[ScalarBuffer<i64>],
    order: Vec<u32>,
    threads: usize,
) -> Option<Vec<RecordBatch>> {
    let width = schema.fields().len();
    if batches.iter().any(|b| b.num_columns() != width) {
        return None;
    }
    let columns: Vec<ArrayRef> = if let [batch] = batches {
        let indices = UInt32Array::from(order);
        let column = |c: usize| take(batch.column(c).as_ref(), &indices, None);
        by_column(width, threads, column).ok()?
    } else {
        let mut starts = vec![0usize];
        for t in times {
            starts.push(starts.last().expect("one") + t.len());
        }
        let at = |row: u32| {
            let b = starts.partition_point(|&s| s <= row as usize) - 1;
            (b, row as usize - starts[b])
        };
        let indices: Vec<(usize, usize)> = order.into_iter().map(at).collect();
        let column = |c: usize| {
            let parts: Vec<&dyn Array> = batches.iter().map(|b| b.column(c).as_ref()).collect();
            interleave(&parts, &indices)
        };
        by_column(width, threads, column).ok()?
    };
    RecordBatch::try_new(schema.clone(), columns)
        .ok()
        .map(|b| vec![b])
}

/// `column(c)` for every column `c < width`, on up to `threads` threads (the caller's among them): a gather
/// in random order waits on memory, and columns are independent. Scoped threads: each gathers its columns
/// in well under a second, so a Ctrl-C waits for no more than that.
fn by_column<F>(
    width: usize,
    threads: usize,
    column: F,
) -> std::result::Result<Vec<ArrayRef>, ArrowError>
where
    F: Fn(usize) -> std::result::Result<ArrayRef, ArrowError> + Sync,
{
    let threads = threads.clamp(1, width.max(1));
    if threads == 1 {
        return (0..width).map(&column).collect();
    }
    // Thread t gathers columns t, t + threads, ...; the caller is thread 0.
    let share = |t: usize| {
        (t..width)
            .step_by(threads)
            .map(|c| (c, column(c)))
            .collect::<Vec<_>>()
    };
    let mut parts = std::thread::scope(|scope| {
        let others: Vec<_> = (1..threads)
            .map(|t| scope.spawn(move || share(t)))
            .collect();
        let mut all = share(0);
        for h in others {
            // A gather does not panic on valid indices; if one did, the panic is the caller's.
            all.extend(h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
        }
        all
    });
    parts.sort_by_key(|(c, _)| *c);
    parts.into_iter().map(|(_, a)| a).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> WindowSpec {
        WindowSpec::new(60, Some(10), 0).unwrap()
    }

    #[test]
    fn only_short_pane_runs_count_as_scattered() {
        // Sorted, panes of 10 rows: short runs, but one a pane already.
        let sorted: Vec<i64> = (0..20_000).collect();
        // Reversed within blocks of 100 rows: still one run a pane.
        let mut blocks = sorted.clone();
        for b in blocks.chunks_mut(100) {
            b.reverse();
        }
        // Scattered: a step of 7 919 over 20 000 rows jumps panes at every row.
        let scattered: Vec<i64> = (0..20_000).map(|i| (i * 7_919) % 20_000).collect();
        let probe = |ts: &[i64]| super::scattered(&[ScalarBuffer::from(ts.to_vec())], &spec());
        assert!(!probe(&sorted));
        assert!(!probe(&blocks));
        assert!(probe(&scattered));
        // Split over batches: probed batch by batch.
        let parts = [
            ScalarBuffer::from(scattered[..300].to_vec()),
            ScalarBuffer::from(scattered[300..].to_vec()),
        ];
        assert!(super::scattered(&parts, &spec()));
    }

    #[test]
    fn the_order_groups_panes_and_keeps_each_panes_rows_in_order() {
        let ts: Vec<i64> = vec![35, 3, -7, 31, 9, 3, 100, -1, 30];
        let times = [
            ScalarBuffer::from(ts[..4].to_vec()),
            ScalarBuffer::from(ts[4..].to_vec()),
        ];
        let order = by_pane(&times, &spec(), ts.len()).unwrap();
        // Panes (of 10): -1 for -7 and -1, 0 for 3, 9, 3, 3 for 35, 31, 30, 10 for 100.
        assert_eq!(order, vec![2, 7, 1, 4, 5, 0, 3, 8, 6]);
        // Panes spread far wider than the rows: left as they are.
        let far = [ScalarBuffer::from(vec![0, 1_000_000])];
        assert!(by_pane(&far, &spec(), 2).is_none());
        // A time whose distance to the grid's offset leaves i64: left as it is.
        let edge = WindowSpec::new(60, Some(10), 5).unwrap();
        assert!(by_pane(&[ScalarBuffer::from(vec![i64::MIN, 0])], &edge, 2).is_none());
    }

    #[test]
    fn gathering_across_batches_keeps_every_column() {
        use arrow_array::{Int64Array, StringArray};
        use std::sync::Arc;
        let batch = |ts: Vec<i64>, k: Vec<&str>| {
            RecordBatch::try_from_iter([
                ("ts", Arc::new(Int64Array::from(ts)) as _),
                ("k", Arc::new(StringArray::from(k)) as _),
            ])
            .unwrap()
        };
        let batches = [
            batch(vec![20, 1], vec!["a", "b"]),
            batch(vec![5], vec!["c"]),
        ];
        let times: Vec<ScalarBuffer<i64>> = batches
            .iter()
            .map(|b| crate::arrow_io::as_i64(b.column(0), "ts").unwrap())
            .collect();
        let schema = batches[0].schema();
        let out = gather(&schema, &batches, &times, vec![1, 2, 0], 2).unwrap();
        assert_eq!(out[0], batch(vec![1, 5, 20], vec!["b", "c", "a"]));
        let one = gather(&schema, &batches[..1], &times[..1], vec![1, 0], 1).unwrap();
        assert_eq!(one[0], batch(vec![1, 20], vec!["b", "a"]));
    }
}
