//! Time ranges side by side: the batch function's parallel plan for in-memory input sorted by time.
//!
//! Why: the other parallel engines cut the work by key (the shard) or by stage (the farm), and both pay for it
//! on every row: each worker scans every row for its keys, or rows cross threads. When the input is already in
//! memory and sorted by time, a cut by time costs nothing per row. Worker `k` owns the windows whose start lies
//! in `[B_k, B_k+1)` on the window grid, runs the single-threaded pane engine over the rows those windows hold
//! (`[B_k, B_k+1 - slide + size)`: the ranges overlap by `size - slide` of time), and drops the windows at its
//! edges, which it saw only in part. The caller only slices.
//!
//! Input not in time order (a stream's bounded disorder) is cut too: then each range's rows are found by a scan
//! (the first row at or after its first window's start, the last row before its last window's end), and the
//! rows between them that belong to neither window edge are lifted into panes no kept window reads. Scattered
//! input would make every range read nearly everything: the cut's overlap bound refuses it.
//!
//! The same rows, bit for bit: every window is computed by one pane engine from the same rows in the same
//! order (arrival numbers are offset by the rows before the range, so `first`/`last` ties break the same
//! way), and the output order `(window, key value)` does not depend on which keys a worker met first, so the
//! workers' windows, concatenated in range order, are the single engine's.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use arrow_array::RecordBatch;
use arrow_buffer::ScalarBuffer;
use arrow_schema::SchemaRef;

use super::batch::{BatchOutput, Tuning, window_aggregate_sorted, window_aggregate_tuned};
use super::operator::WindowAggregator;
use super::options::WindowAggregateOptions;
use super::partial::{InputKind, OutputKind};
use super::strategy::Strategy;
use crate::arrow_io::{as_i64, column};
use crate::error::{Error, ErrorKind, Result};
use crate::interrupt;
use crate::kept_threads;
use crate::order::admission::OnLate;
use crate::prefetch::non_decreasing;
use crate::threads::{MAX_THREADS, resolve_threads};
use crate::time::WindowSpec;

/// How often the caller checks for Ctrl-C while it waits for the other ranges.
const POLL: Duration = Duration::from_millis(5);

/// One worker's share.
#[derive(Debug, Clone, PartialEq)]
struct Range {
    /// Rows `from..to` of the source (numbered across its batches).
    from: usize,
    to: usize,
    /// Windows kept: those starting in `[lo, hi)` (`None`: unbounded).
    lo: Option<i64>,
    hi: Option<i64>,
}

/// Runs `sources` on time ranges side by side if the call allows it and the cut re-reads few rows: input
/// sorted by time, `by_pane` (grouped by pane, as `super::regroup` leaves it), or in bounded disorder (cut by
/// scans when the sorted cut finds the rows unsorted); `None` when it does not (then the caller runs the
/// operator as usual, which also reports any bad input).
pub(super) fn try_run(
    sources: &[(SchemaRef, Vec<RecordBatch>)],
    opts: &WindowAggregateOptions,
    tuning: Tuning,
    by_pane: bool,
    on_batch: &mut dyn FnMut() -> Result<()>,
) -> Result<Option<BatchOutput>> {
    let threads = resolve_threads(opts.threads).min(MAX_THREADS);
    let [(schema, batches)] = sources else {
        return Ok(None);
    };
    let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
    if !eligible(opts) || threads < 2 || rows < tuning.split_min_rows.max(2) {
        return Ok(None);
    }
    let Some(spec) = grid(schema, opts) else {
        return Ok(None);
    };
    let Some(times) = time_columns(batches, &opts.time) else {
        return Ok(None);
    };
    let first = if by_pane {
        Layout::ByPane
    } else {
        Layout::Sorted
    };
    for layout in [first, Layout::Any] {
        let rows = Rows {
            layout,
            ..Rows::new(&times)
        };
        // A sorted cut assumes sorted times; each range then checks its own rows as its plan reads them, before
        // it pushes any (in parallel, no pass of its own), and `covered` checks the rows between ranges.
        let ranges = cut(&rows, &spec, threads, tuning.split_max_overlap);
        if ranges.len() < 2 || !covered(&rows, &ranges) {
            // A sorted cut of rows that are not sorted proves nothing: cut them by scans.
            if layout == Layout::Sorted && !rows.sorted(0, rows.len()) {
                continue;
            }
            return Ok(None);
        }
        match run(&rows, schema, batches, opts, &ranges, tuning, on_batch)? {
            Ran::Done(out) => return Ok(Some(out)),
            Ran::Failed => return Ok(None),
            Ran::Unsorted => continue,
        }
    }
    Ok(None)
}

/// How a cut finds the rows of a range of times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// Times never decrease (each range checks its rows): a binary search.
    Sorted,
    /// Rows grouped by pane in pane order (`super::regroup` made them so): the cut falls on pane boundaries,
    /// so a binary search holds without sorted times, and there is nothing to check.
    ByPane,
    /// Any order: a scan finds the first row at or after a time and the last row before one.
    Any,
}

/// What running the ranges gave.
enum Ran {
    Done(BatchOutput),
    /// A range found its rows unsorted: cut again by scans.
    Unsorted,
    /// A range failed: the usual path runs the input (see [`gather`]).
    Failed,
}

/// The options a time cut keeps exact: `auto` on raw rows into plain windows, without a calendar or updates,
/// and without late rows as a side output (`on_late="keep"`): neighbouring ranges read the rows between them
/// both, and each range's late rows would be its own, so the side output would repeat or lose rows.
pub(super) fn eligible(o: &WindowAggregateOptions) -> bool {
    o.strategy == Strategy::Auto
        && o.on_late != OnLate::Keep
        && o.input == InputKind::Rows
        && o.output == OutputKind::Windows
        && o.tz.is_none()
        && o.allowed_lateness.is_none()
        && o.emit == super::options::Emit::Final
        && o.gap.is_none()
        && o.rows.is_none()
}

/// The window grid of the query on this schema, from an operator bound to it; `None` if binding fails (the
/// usual path reports why) or rows are placed on a calendar.
pub(super) fn grid(schema: &SchemaRef, opts: &WindowAggregateOptions) -> Option<WindowSpec> {
    let mut probe = WindowAggregator::for_batch(opts.clone(), 1).ok()?;
    probe.bind_source(0, schema).ok()?;
    probe.plain_grid()
}

/// The time column of every batch as i64, if no time is null.
pub(super) fn time_columns(batches: &[RecordBatch], time: &str) -> Option<Vec<ScalarBuffer<i64>>> {
    batches
        .iter()
        .map(|b| {
            let col = column(b, time, "time").ok()?;
            (col.logical_null_count() == 0).then_some(())?;
            as_i64(col, time).ok()
        })
        .collect()
}

/// Rows numbered across batches.
#[derive(Clone)]
struct Rows<'a> {
    times: &'a [ScalarBuffer<i64>],
    /// Row number of each batch's first row, then the total.
    starts: Vec<usize>,
    layout: Layout,
}

impl<'a> Rows<'a> {
    fn new(times: &'a [ScalarBuffer<i64>]) -> Self {
        let mut starts = vec![0];
        for t in times {
            starts.push(starts.last().expect("one") + t.len());
        }
        Self {
            times,
            starts,
            layout: Layout::Sorted,
        }
    }

    fn len(&self) -> usize {
        *self.starts.last().expect("one")
    }

    fn at(&self, row: usize) -> i64 {
        let b = self.starts.partition_point(|&s| s <= row) - 1;
        self.times[b][row - self.starts[b]]
    }

    /// Whether the times of rows `from..to` never decrease (or need not: the rows are grouped by pane, or cut
    /// by scans): one vectorised pass per batch they cross, and the step between batches.
    fn sorted(&self, from: usize, to: usize) -> bool {
        if self.layout != Layout::Sorted {
            return true;
        }
        let mut last = i64::MIN;
        for (b, t) in self.times.iter().enumerate() {
            let (start, end) = (self.starts[b], self.starts[b + 1]);
            let (lo, hi) = (from.max(start), to.min(end));
            if lo >= hi {
                continue;
            }
            let part = &t[lo - start..hi - start];
            if part[0] < last || !non_decreasing(part) {
                return false;
            }
            last = part[part.len() - 1];
        }
        true
    }

    /// The first row whose time is at least `t` (the row count if none), in a sorted layout by a binary search
    /// (some row if the times are not sorted after all: each range checks its rows before it trusts the cut).
    fn first_at_or_after(&self, t: i128) -> usize {
        if self.layout == Layout::Any {
            // `x >= t` in i64, which the scan's blocks compare as vectors: no time lies past i64's range.
            let Ok(t) = i64::try_from(t.max(i64::MIN as i128)) else {
                return self.len();
            };
            let mut rows = self.times.iter().zip(&self.starts);
            let found =
                rows.find_map(|(times, &start)| first_at_least(times, t).map(|i| start + i));
            return found.unwrap_or(self.len());
        }
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if (self.at(mid) as i128) < t {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// One past the last row whose time is below `t` (0 if none): every row before `t` lies before it. In a
    /// sorted layout that is the first row at or after `t`.
    fn end_before(&self, t: i128) -> usize {
        if self.layout != Layout::Any {
            return self.first_at_or_after(t);
        }
        // `x < t` in i64, as in `first_at_or_after`.
        if t > i64::MAX as i128 {
            return self.len();
        }
        let Ok(t) = i64::try_from(t) else {
            return 0;
        };
        let mut rows = self.times.iter().zip(&self.starts).rev();
        let found = rows.find_map(|(times, &start)| last_below(times, t).map(|i| start + i + 1));
        found.unwrap_or(0)
    }
}

/// Rows a scan of [`Rows`] tests at once: a block reduction the compiler vectorises, then the row within the
/// block that matched.
const SCAN_BLOCK: usize = 64;

crate::prefetch::with_avx2! {
    /// The first `i` with `times[i] >= t`.
    fn first_at_least(times: &[i64], t: i64) -> Option<usize> = first_at_least_blocks;
}

crate::prefetch::with_avx2! {
    /// The last `i` with `times[i] < t`.
    fn last_below(times: &[i64], t: i64) -> Option<usize> = last_below_blocks;
}

#[inline(always)]
fn first_at_least_blocks(times: &[i64], t: i64) -> Option<usize> {
    let mut base = 0;
    for block in times.chunks(SCAN_BLOCK) {
        if block.iter().fold(false, |any, &x| any | (x >= t)) {
            return block.iter().position(|&x| x >= t).map(|i| base + i);
        }
        base += block.len();
    }
    None
}

#[inline(always)]
fn last_below_blocks(times: &[i64], t: i64) -> Option<usize> {
    let mut end = times.len();
    for block in times.rchunks(SCAN_BLOCK) {
        let base = end - block.len();
        if block.iter().fold(false, |any, &x| any | (x < t)) {
            return block.iter().rposition(|&x| x < t).map(|i| base + i);
        }
        end = base;
    }
    None
}

/// Cuts sorted rows into at most `parts` ranges at window starts, each reading about as many rows, overlap
/// included; one range (no cut) when the times do not spread over several window starts or the ranges would
/// re-read more than `max_overlap` of the rows.
fn cut(rows: &Rows<'_>, spec: &WindowSpec, parts: usize, max_overlap: f64) -> Vec<Range> {
    let n = rows.len();
    // Range k reads [c_k, c_k+1 + o): with o rows of overlap a cut, equal ranges cut at k (n - o) / parts.
    // The overlap is only estimated here: rows in any order take the binary search's rows for it, and pay for
    // their scans once.
    let sorted_view = Rows {
        layout: Layout::Sorted,
        ..rows.clone()
    };
    let first = cut_at(&sorted_view, spec, parts, 0);
    let overlaps: Vec<usize> = first
        .windows(2)
        .map(|w| w[0].to.saturating_sub(w[1].from))
        .collect();
    let o = overlaps.iter().sum::<usize>() / overlaps.len().max(1);
    let ranges = if o > 0 && o < n {
        cut_at(rows, spec, parts, o)
    } else if rows.layout == Layout::Any {
        cut_at(rows, spec, parts, 0)
    } else {
        first
    };
    let read: usize = ranges.iter().map(|r| r.to.saturating_sub(r.from)).sum();
    if ranges.len() < 2 || read as f64 > n as f64 * (1.0 + max_overlap) {
        return ranges.into_iter().take(1).collect();
    }
    ranges
}

/// The ranges cut at the window starts at or below rows `k (n - overlap) / parts`, kept if they increase.
fn cut_at(rows: &Rows<'_>, spec: &WindowSpec, parts: usize, overlap: usize) -> Vec<Range> {
    let n = rows.len();
    let (size, slide, offset) = (
        spec.size() as i128,
        spec.slide() as i128,
        spec.offset() as i128,
    );
    let mut bounds: Vec<i128> = vec![];
    for k in 1..parts {
        let t = rows.at(k * (n - overlap) / parts) as i128;
        let start = (t - offset).div_euclid(slide) * slide + offset;
        if bounds.last().is_none_or(|&b| start > b) && start > rows.at(0) as i128 {
            bounds.push(start);
        }
    }
    (0..=bounds.len())
        .map(|k| {
            let lo = k.checked_sub(1).map(|j| bounds[j]);
            let hi = bounds.get(k).copied();
            Range {
                from: lo.map_or(0, |b| rows.first_at_or_after(b)),
                // The last window kept starts at hi - slide and ends at hi - slide + size.
                to: hi.map_or(n, |b| rows.end_before(b - slide + size)),
                lo: lo.map(|b| b as i64),
                hi: hi.map(|b| b as i64),
            }
        })
        .collect()
}

/// Whether the ranges, each checking its own rows, check them all: they run in order from the first row to
/// the last, and an adjacent pair of rows lies in one range (ranges overlap) or is checked here (ranges that
/// meet, or a cut of unsorted times that left rows between them).
fn covered(rows: &Rows<'_>, ranges: &[Range]) -> bool {
    let ends = ranges.first().is_some_and(|r| r.from == 0)
        && ranges.last().is_some_and(|r| r.to == rows.len());
    ends && ranges.iter().all(|r| r.from <= r.to)
        && ranges.windows(2).all(|w| {
            let (a, b) = (&w[0], &w[1]);
            a.from <= b.from
                && a.to <= b.to
                && (b.from < a.to || rows.sorted(a.to.saturating_sub(1), b.from + 1))
        })
}

/// The error of a range that stopped because another range failed or found its rows unsorted.
const STOPPED: &str = "stopped: another time range failed";

/// Runs every range but the last on a kept worker thread (`crate::kept_threads`) and the last on the caller's,
/// which also watches for Ctrl-C; concatenates the kept windows in range order.
///
/// A failure anywhere stops every range at its next check (between pieces, and inside long emissions for the
/// workers, whose interrupt checks read the same flag): whoever fails sets it.
fn run(
    rows: &Rows<'_>,
    schema: &SchemaRef,
    batches: &[RecordBatch],
    opts: &WindowAggregateOptions,
    ranges: &[Range],
    tuning: Tuning,
    on_batch: &mut dyn FnMut() -> Result<()>,
) -> Result<Ran> {
    let stop = Arc::new(AtomicBool::new(false));
    let unsorted = Arc::new(AtomicBool::new(false));
    // A sorted cut's ranges check their own rows as they plan them (see `run_range`).
    let check = rows.layout == Layout::Sorted;
    let (last, others) = ranges.split_last().expect("two ranges at least");
    let mut workers = Vec::with_capacity(others.len());
    for r in others {
        let (flag, unsorted) = (stop.clone(), unsorted.clone());
        let (schema, batches, opts, r) =
            (schema.clone(), batches.to_vec(), opts.clone(), r.clone());
        let job = move || {
            let ran = interrupt::scope_until(flag.clone(), || {
                run_range(
                    &schema,
                    &batches,
                    &opts,
                    &r,
                    check,
                    tuning,
                    &mut interrupt::check,
                )
            });
            sorted_or_stop(ran, &unsorted, &flag)
        };
        match kept_threads::run(job) {
            Ok(task) => workers.push(task),
            Err(_) => {
                // No thread for a range: the ranges already started see `stop` at their next check, and the
                // input takes the usual path.
                stop.store(true, Ordering::Relaxed);
                workers.into_iter().for_each(|t| drop(t.join()));
                return Ok(Ran::Failed);
            }
        }
    }
    let mine = run_range(schema, batches, opts, last, check, tuning, &mut || {
        if stop.load(Ordering::Relaxed) {
            return Err(Error::new(ErrorKind::Interrupted, STOPPED));
        }
        on_batch()
    });
    let mut mine = sorted_or_stop(mine, &unsorted, &stop);
    // Ctrl-C is heard while the workers finish.
    for task in &mut workers {
        while mine.is_ok() && !task.done_within(POLL) {
            if let Err(e) = on_batch() {
                mine = Err(e);
                stop.store(true, Ordering::Relaxed);
            }
        }
    }
    let workers: Vec<_> = workers
        .into_iter()
        .map(|t| t.join().and_then(|r| r))
        .collect();
    if interrupted_by_caller(&mine) {
        return mine.map(Ran::Done);
    }
    if unsorted.load(Ordering::Relaxed) {
        return Ok(Ran::Unsorted);
    }
    Ok(gather(workers, mine).map_or(Ran::Failed, Ran::Done))
}

/// A range's result: a range whose rows turn out not sorted (see `run_range`) says so and stops every range,
/// and so does a range that failed; the input then takes the usual path.
fn sorted_or_stop(
    ran: Result<Option<BatchOutput>>,
    unsorted: &AtomicBool,
    stop: &AtomicBool,
) -> Result<BatchOutput> {
    let out = ran.and_then(|out| {
        out.ok_or_else(|| {
            unsorted.store(true, Ordering::Relaxed);
            Error::new(ErrorKind::Interrupted, STOPPED)
        })
    });
    if out.is_err() {
        stop.store(true, Ordering::Relaxed);
    }
    out
}

/// Ctrl-C (or another error of the caller's check) while the ranges ran, not a stop another range asked for.
fn interrupted_by_caller(mine: &Result<BatchOutput>) -> bool {
    mine.as_ref()
        .is_err_and(|e| e.kind() == ErrorKind::Interrupted && e.message() != STOPPED)
}

/// The ranges' windows concatenated in range order (the caller's last), or `None` when any range failed:
/// then the caller runs the input the usual way, which reports what the whole input gives. A range's failure
/// need not be the call's: the windows at a range's edges are built from part of their rows, and a part can
/// fail where the whole window does not (an integer sum whose part overflows int64 while the whole fits);
/// and a real failure is found again by the usual path, from the rows a single engine reads first.
fn gather(workers: Vec<Result<BatchOutput>>, mine: Result<BatchOutput>) -> Option<BatchOutput> {
    let mut out: Option<BatchOutput> = None;
    for r in workers.into_iter().chain([mine]) {
        let part = r.ok()?;
        match &mut out {
            None => out = Some(part),
            Some(o) => o.batches.extend(part.batches),
        }
    }
    out
}

/// One range through the single-threaded pane engine, keeping the windows it owns; with `check`, `None` when
/// its rows turn out not sorted by time (found by the plan's read of them, before any row is pushed).
fn run_range(
    schema: &SchemaRef,
    batches: &[RecordBatch],
    opts: &WindowAggregateOptions,
    range: &Range,
    check: bool,
    tuning: Tuning,
    on_batch: &mut dyn FnMut() -> Result<()>,
) -> Result<Option<BatchOutput>> {
    let mut o = opts.clone();
    o.strategy = Strategy::Pane;
    o.threads = Some(1);
    o.row_offset = opts.row_offset + range.from as u64;
    let slices = slice_rows(batches, range.from, range.to);
    let source = vec![(schema.clone(), slices)];
    let ran = match check {
        true => window_aggregate_sorted(source, o, tuning, on_batch)?,
        false => Some(window_aggregate_tuned(source, o, tuning, on_batch)?),
    };
    let Some(mut out) = ran else {
        return Ok(None);
    };
    let at = opts.by.len();
    let mut kept = Vec::with_capacity(out.batches.len());
    for b in out.batches.drain(..) {
        let starts = as_i64(b.column(at), "window_start")?;
        let from = range.lo.map_or(0, |lo| starts.partition_point(|&s| s < lo));
        let to = range
            .hi
            .map_or(b.num_rows(), |hi| starts.partition_point(|&s| s < hi));
        if to > from {
            kept.push(b.slice(from, to - from));
        }
    }
    out.batches = kept;
    Ok(Some(out))
}

/// Rows `from..to` (numbered across batches) as slices of the batches, without copying.
fn slice_rows(batches: &[RecordBatch], from: usize, to: usize) -> Vec<RecordBatch> {
    let mut out = vec![];
    let mut start = 0;
    for b in batches {
        let end = start + b.num_rows();
        let (lo, hi) = (from.max(start), to.min(end));
        if lo < hi {
            out.push(b.slice(lo - start, hi - lo));
        }
        start = end;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn times(parts: &[&[i64]]) -> Vec<ScalarBuffer<i64>> {
        parts.iter().map(|p| p.to_vec().into()).collect()
    }

    #[test]
    fn cuts_at_window_starts_with_the_overlap_of_a_window() {
        // Windows of 10 sliding by 5: the left range reads 5 rows past its last window's start plus 5; the cut
        // moves left by half of that so both read about as many rows (50 and 55: cuts fall on window starts).
        let ts: Vec<i64> = (0..100).collect();
        let spec = WindowSpec::new(10, Some(5), 0).unwrap();
        let t = times(&[&ts[..30], &ts[30..]]);
        let r = cut(&Rows::new(&t), &spec, 2, 0.25);
        assert_eq!(
            r,
            vec![
                Range {
                    from: 0,
                    to: 50,
                    lo: None,
                    hi: Some(45)
                },
                Range {
                    from: 45,
                    to: 100,
                    lo: Some(45),
                    hi: None
                },
            ]
        );
        assert!(covered(&Rows::new(&t), &r));
    }

    #[test]
    fn coverage_needs_every_adjacent_pair_in_one_range_or_checked() {
        let ts: Vec<i64> = (0..100).collect();
        let t = times(&[&ts]);
        let rows = Rows::new(&t);
        let r = |from, to| Range {
            from,
            to,
            lo: None,
            hi: None,
        };
        assert!(covered(&rows, &[r(0, 52), r(50, 100)]));
        // Adjacent (no overlap) or apart: the rows between are checked here.
        assert!(covered(&rows, &[r(0, 50), r(50, 100)]));
        assert!(covered(&rows, &[r(0, 40), r(50, 100)]));
        let mut bad = ts.clone();
        bad.swap(44, 45);
        let t = times(&[&bad]);
        assert!(!covered(&Rows::new(&t), &[r(0, 40), r(50, 100)]));
        // Not from the first row to the last, or out of order (a cut of unsorted times).
        assert!(!covered(&rows, &[r(1, 52), r(50, 100)]));
        assert!(!covered(&rows, &[r(0, 52), r(50, 99)]));
        assert!(!covered(&rows, &[r(0, 60), r(50, 40)]));
    }

    #[test]
    fn each_range_checks_its_rows() {
        let mut ts: Vec<i64> = (0..100).collect();
        ts.swap(10, 11);
        let t = times(&[&ts[..37], &ts[37..]]);
        let rows = Rows::new(&t);
        assert!(!rows.sorted(0, 50) && rows.sorted(11, 100) && rows.sorted(0, 11));
        let t = times(&[&[1, 2, 3], &[2, 4]]);
        assert!(!Rows::new(&t).sorted(0, 5) && Rows::new(&t).sorted(3, 5));
    }

    #[test]
    fn no_cut_when_times_do_not_spread() {
        let spec = WindowSpec::new(10, None, 0).unwrap();
        assert_eq!(
            cut(&Rows::new(&times(&[&[7; 50]])), &spec, 2, 0.25).len(),
            1
        );
        // Windows as long as the input: the overlap would re-read everything.
        let ts: Vec<i64> = (0..100).collect();
        let long = WindowSpec::new(100, Some(1), 0).unwrap();
        assert_eq!(cut(&Rows::new(&times(&[&ts])), &long, 2, 0.25).len(), 1);
    }

    fn query(threads: usize) -> (Vec<(SchemaRef, Vec<RecordBatch>)>, WindowAggregateOptions) {
        use arrow_array::{Float64Array, Int64Array};
        use std::sync::Arc;
        let n = 1000i64;
        let batch = RecordBatch::try_from_iter([
            (
                "ts",
                Arc::new(Int64Array::from_iter_values((0..n).map(|i| i / 3))) as _,
            ),
            (
                "k",
                Arc::new(Int64Array::from_iter_values(
                    (0..n).map(|i| (i * 7919) % 13),
                )) as _,
            ),
            (
                "v",
                Arc::new(Float64Array::from_iter_values(
                    (0..n).map(|i| (i as f64).sin()),
                )) as _,
            ),
        ])
        .unwrap();
        let funcs = ["sum", "first", "max", "mean"].map(String::from).to_vec();
        let mut o = WindowAggregateOptions::new(
            "ts",
            crate::aggregate::Span::Units(20),
            vec![("v".into(), funcs)],
        );
        o.slide = Some(crate::aggregate::Span::Units(5));
        o.by = vec!["k".into()];
        o.threads = Some(threads);
        let sources = vec![(
            batch.schema(),
            vec![batch.slice(0, 400), batch.slice(400, 600)],
        )];
        (sources, o)
    }

    const TINY: Tuning = Tuning {
        piece_rows: 64,
        split_min_rows: 2,
        split_max_overlap: 0.25,
    };

    /// A window at the cut whose part in the right range overflows an integer sum while the whole window
    /// fits: the call gives the pane engine's rows, not the part's overflow.
    #[test]
    fn a_part_that_fails_where_the_whole_window_does_not_is_not_the_calls_failure() {
        use arrow_array::Int64Array;
        use std::sync::Arc;
        let n = 1000usize;
        let spec = WindowSpec::new(3, Some(1), 0).unwrap();
        let ts: Vec<i64> = (0..n as i64).collect();
        let ranges = cut(&Rows::new(&times(&[&ts])), &spec, 2, 0.25);
        let b = ranges[1].from; // the right range's first row: time b, in windows starting b - 2 ..= b
        let mut v = vec![0i64; n];
        // Window b - 1 holds -1, MAX and 1 (MAX); the right range sees only MAX + 1 of it. Every whole window
        // fits: b holds MAX, 1, -1.
        v[b - 1..b + 3].copy_from_slice(&[-1, i64::MAX, 1, -1]);
        let batch = RecordBatch::try_from_iter([
            ("ts", Arc::new(Int64Array::from(ts.clone())) as _),
            ("v", Arc::new(Int64Array::from(v)) as _),
        ])
        .unwrap();
        let mut o = WindowAggregateOptions::new(
            "ts",
            crate::time::Span::Units(3),
            vec![("v".into(), vec!["sum".into()])],
        );
        o.slide = Some(crate::time::Span::Units(1));
        o.threads = Some(2);
        let sources = vec![(batch.schema(), vec![batch])];
        let auto = window_aggregate_tuned(sources.clone(), o.clone(), TINY, || Ok(())).unwrap();
        let mut pane = o;
        pane.strategy = Strategy::Pane;
        pane.threads = Some(1);
        let whole = window_aggregate_tuned(sources, pane, TINY, || Ok(())).unwrap();
        let concat =
            |b: &BatchOutput| arrow_select::concat::concat_batches(&b.schema, &b.batches).unwrap();
        assert_eq!(concat(&auto), concat(&whole));
    }

    #[test]
    fn sorted_input_runs_in_ranges_and_equals_the_pane_engine() {
        // Eight ranges would re-read 7 x 15 time units of 333 (32%): that query is not cut.
        for (threads, cut) in [(2, true), (3, true), (8, false)] {
            let (sources, o) = query(threads);
            let split = try_run(&sources, &o, TINY, false, &mut || Ok(())).unwrap();
            assert_eq!(split.is_some(), cut, "threads {threads}");
            let Some(split) = split else { continue };
            let mut pane = o.clone();
            pane.strategy = Strategy::Pane;
            let whole = window_aggregate_tuned(sources, pane, TINY, || Ok(())).unwrap();
            let concat = |b: &BatchOutput| {
                arrow_select::concat::concat_batches(&b.schema, &b.batches).unwrap()
            };
            assert_eq!(concat(&split), concat(&whole), "threads {threads}");
        }
    }

    #[test]
    fn interrupt_on_the_callers_thread_stops_every_range() {
        let (sources, o) = query(2);
        let mut calls = 0;
        let mut check = || {
            calls += 1;
            if calls > 2 {
                Err(Error::new(ErrorKind::Interrupted, "Ctrl-C"))
            } else {
                Ok(())
            }
        };
        let e = try_run(&sources, &o, TINY, false, &mut check).unwrap_err();
        assert_eq!(e.message(), "Ctrl-C");
    }

    /// The query of [`query`] on rows `(time, key, value)`, cut into `batches` batches.
    fn query_on(
        rows: &[(i64, i64, f64)],
        batches: usize,
        threads: usize,
    ) -> (Vec<(SchemaRef, Vec<RecordBatch>)>, WindowAggregateOptions) {
        use arrow_array::{Float64Array, Int64Array};
        use std::sync::Arc;
        let (mut sources, o) = query(threads);
        let col = |f: fn(&(i64, i64, f64)) -> i64| Int64Array::from_iter_values(rows.iter().map(f));
        let batch = RecordBatch::try_new(
            sources[0].0.clone(),
            vec![
                Arc::new(col(|r| r.0)),
                Arc::new(col(|r| r.1)),
                Arc::new(Float64Array::from_iter_values(rows.iter().map(|r| r.2))),
            ],
        )
        .unwrap();
        let step = rows.len().div_ceil(batches).max(1);
        sources[0].1 = (0..rows.len())
            .step_by(step)
            .map(|at| batch.slice(at, step.min(rows.len() - at)))
            .collect();
        (sources, o)
    }

    /// The pane engine's rows over the whole input, and the cut's (if it cut).
    fn split_and_whole(
        sources: Vec<(SchemaRef, Vec<RecordBatch>)>,
        o: &WindowAggregateOptions,
    ) -> (Option<RecordBatch>, RecordBatch) {
        let concat =
            |b: &BatchOutput| arrow_select::concat::concat_batches(&b.schema, &b.batches).unwrap();
        let split = try_run(&sources, o, TINY, false, &mut || Ok(())).unwrap();
        let mut pane = o.clone();
        pane.strategy = Strategy::Pane;
        let whole = window_aggregate_tuned(sources, pane, TINY, || Ok(())).unwrap();
        (split.as_ref().map(concat), concat(&whole))
    }

    proptest::proptest! {
        /// Rows in any order (sorted, displaced by up to `disorder` places, or scattered): a cut, made by scans
        /// once the sorted cut finds the rows unsorted, gives the pane engine's rows over the whole input.
        #[test]
        fn disordered_input_cut_by_scans_equals_the_pane_engine(
            rows in proptest::collection::vec((0i64..300, 0i64..7, -50.0f64..50.0), 2..400),
            disorder in proptest::prop_oneof![0usize..4, 0usize..40, 0usize..1000],
            noise in proptest::collection::vec(0usize..1000, 400),
            batches in 1usize..4,
            threads in 2usize..4,
        ) {
            let mut rows = rows;
            rows.sort_by_key(|r| r.0);
            // Row i moves to place i + noise, within `disorder` places.
            let mut at: Vec<(usize, usize)> =
                (0..rows.len()).map(|i| (i + noise[i] % (disorder + 1), i)).collect();
            at.sort();
            let rows: Vec<_> = at.iter().map(|&(_, i)| rows[i]).collect();
            let (sources, o) = query_on(&rows, batches, threads);
            let (split, whole) = split_and_whole(sources, &o);
            if let Some(split) = split {
                proptest::prop_assert_eq!(split, whole);
            }
        }
    }

    #[test]
    fn rows_in_bounded_disorder_are_cut() {
        let (sources, o) = query(2);
        let batch = arrow_select::concat::concat_batches(&sources[0].0, &sources[0].1).unwrap();
        // Swap every pair of neighbours: times out of order by one row everywhere.
        let swap: Vec<u32> = (0..batch.num_rows() as u32).map(|i| i ^ 1).collect();
        let swapped =
            arrow_select::take::take_record_batch(&batch, &arrow_array::UInt32Array::from(swap))
                .unwrap();
        let sources = vec![(
            batch.schema(),
            vec![swapped.slice(0, 500), swapped.slice(500, 500)],
        )];
        let (split, whole) = split_and_whole(sources, &o);
        assert_eq!(split.expect("cut by scans"), whole);
    }

    #[test]
    fn unsorted_or_null_times_are_not_cut() {
        let (mut sources, o) = query(2);
        sources[0].1.reverse();
        assert!(
            try_run(&sources, &o, TINY, false, &mut || Ok(()))
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn slices_cross_batches() {
        let b = |n: i64| {
            RecordBatch::try_from_iter([(
                "ts",
                std::sync::Arc::new(arrow_array::Int64Array::from_iter_values(0..n)) as _,
            )])
            .unwrap()
        };
        let s = slice_rows(&[b(3), b(4), b(5)], 2, 9);
        assert_eq!(
            s.iter().map(|b| b.num_rows()).collect::<Vec<_>>(),
            vec![1, 4, 2]
        );
    }
}
