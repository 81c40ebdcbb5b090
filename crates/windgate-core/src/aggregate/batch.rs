//! The batch functions: every source's rows through one [`WindowAggregator`], then the end of the stream.
//!
//! Without `lateness` the result is exact over all rows whatever their order, so a streamed input cannot
//! close a window before its end: every pane stays open and all the windows are built at the flush, on the
//! caller's thread. Input that is already in memory (a table) lets us do better without changing a row of
//! the result: before each piece the function promises the operator the least time still to come, windows
//! close as soon as no later row can reach them, and the farm's stages overlap from the first piece on.

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;

use super::operator::WindowAggregator;
use super::options::WindowAggregateOptions;
use crate::arrow_io::{as_i64, column};
use crate::error::Result;
use crate::prefetch::min_max_sorted;

/// Rows pushed between two promises: large enough that a push's fixed cost (binding checks, the emission of
/// the windows that closed) is noise, small enough that the farm's stages overlap early. No larger than the
/// operator's ingest slice (32k rows): a larger push is first read whole and then again slice by slice, a
/// second pass over its time column (measured: 5 instructions a row of 252).
pub const PIECE_ROWS: usize = 1 << 15;

/// From this many input rows on, `strategy="auto"` runs in-memory input on the sharded engine when it has more
/// than one thread (see the operator's `bind`). Measured on 2 cores (smart-grid rows, 60 s / 10 s windows, 1000
/// keys): the farm on 2 threads tied the pane engine at 1 M rows and was 1.2-1.5x faster from 3 M rows on;
/// the sharded engine beat the farm on 8 M random keys (see the operator's `bind`); below, threads' start-up and
/// hand-offs cost more than the second core gives back.
pub const AUTO_FARM_ROWS: usize = 1 << 20;

/// What a batch function returns.
#[derive(Debug)]
pub struct BatchOutput {
    /// The windows' schema.
    pub schema: SchemaRef,
    /// The windows, in the operator's output order.
    pub batches: Vec<RecordBatch>,
    /// `on_late="keep"`: the late rows, in arrival order (see [`WindowAggregator::take_late_rows`]).
    pub late: Option<RecordBatch>,
}

/// The batch function over streamed input: `sources` holds each source's schema and batches, read once.
///
/// With `lateness`, late rows of each source are dropped (or raise) as in the streaming operator. `on_batch`
/// runs between batches (the bindings check for Ctrl-C there).
pub fn window_aggregate<I>(
    sources: Vec<(SchemaRef, I)>,
    opts: WindowAggregateOptions,
    mut on_batch: impl FnMut() -> Result<()>,
) -> Result<BatchOutput>
where
    I: IntoIterator<Item = Result<RecordBatch>>,
{
    let mut agg = WindowAggregator::for_batch(opts, sources.len())?;
    let mut out = vec![];
    for (s, (schema, batches)) in sources.into_iter().enumerate() {
        agg.bind_source(s, &schema)?;
        for batch in batches {
            on_batch()?;
            keep(&mut out, agg.push(&batch?, s)?);
        }
    }
    finish(agg, out)
}

/// The batch function over input already in memory: the same result as [`window_aggregate`], row for row,
/// with windows closed as soon as they are exact (see the module doc).
///
/// ```
/// use std::sync::Arc;
/// use arrow_array::{Int64Array, RecordBatch};
/// use windgate_core::aggregate::{Span, WindowAggregateOptions, window_aggregate_in_memory};
///
/// let batch = RecordBatch::try_from_iter([
///     ("ts", Arc::new(Int64Array::from(vec![1, 5, 12, 3, 25])) as _),
/// ]).unwrap();
/// let opts = WindowAggregateOptions::new("ts", Span::Units(10), vec![("*".into(), vec!["count".into()])]);
/// let out = window_aggregate_in_memory(vec![(batch.schema(), vec![batch])], opts, || Ok(())).unwrap();
/// let rows: usize = out.batches.iter().map(|b| b.num_rows()).sum();
/// assert_eq!(rows, 3); // [0,10) holds 1, 5 and the late-arriving 3; then [10,20) and [20,30)
/// ```
pub fn window_aggregate_in_memory(
    sources: Vec<(SchemaRef, Vec<RecordBatch>)>,
    opts: WindowAggregateOptions,
    on_batch: impl FnMut() -> Result<()>,
) -> Result<BatchOutput> {
    window_aggregate_in_pieces(sources, opts, PIECE_ROWS, on_batch)
}

/// From this many rows on, `strategy="auto"` on more than one thread cuts in-memory input sorted by time into
/// time ranges run side by side (see `super::ranges`). Each range is a plain pane engine: below this, a
/// thread's start and the windows re-read at each cut cost more than the second core gives back.
pub const SPLIT_MIN_ROWS: usize = 1 << 17;

/// The time ranges may re-read at most this share of the rows (each cut re-reads `size - slide` of time):
/// past it, windows are long next to the input's time span, and the shard, which reads each row once, is the
/// better cut.
pub const SPLIT_MAX_OVERLAP: f64 = 0.25;

/// The batch function's sizes, as parameters for the tests (tiny pieces, tiny ranges).
#[doc(hidden)]
#[derive(Debug, Clone, Copy)]
pub struct Tuning {
    /// Rows pushed between two promises ([`PIECE_ROWS`]).
    pub piece_rows: usize,
    /// Rows from which sorted input is cut into time ranges ([`SPLIT_MIN_ROWS`]).
    pub split_min_rows: usize,
    /// The most rows the time ranges may re-read, as a share of the input ([`SPLIT_MAX_OVERLAP`]).
    pub split_max_overlap: f64,
}

impl Default for Tuning {
    fn default() -> Self {
        Self {
            piece_rows: PIECE_ROWS,
            split_min_rows: SPLIT_MIN_ROWS,
            split_max_overlap: SPLIT_MAX_OVERLAP,
        }
    }
}

/// [`window_aggregate_in_memory`] with the piece size as a parameter (tests use tiny pieces).
#[doc(hidden)]
pub fn window_aggregate_in_pieces(
    sources: Vec<(SchemaRef, Vec<RecordBatch>)>,
    opts: WindowAggregateOptions,
    piece_rows: usize,
    on_batch: impl FnMut() -> Result<()>,
) -> Result<BatchOutput> {
    let tuning = Tuning {
        piece_rows,
        ..Tuning::default()
    };
    window_aggregate_tuned(sources, opts, tuning, on_batch)
}

/// [`window_aggregate_in_memory`] with every size as a parameter.
#[doc(hidden)]
pub fn window_aggregate_tuned(
    sources: Vec<(SchemaRef, Vec<RecordBatch>)>,
    opts: WindowAggregateOptions,
    tuning: Tuning,
    mut on_batch: impl FnMut() -> Result<()>,
) -> Result<BatchOutput> {
    // Input scattered over panes is grouped by pane first (see `super::regroup`), then runs as sorted input.
    let (sources, by_pane) = match super::regroup::regroup(&sources, &opts, tuning, &mut on_batch)?
    {
        Some(grouped) => (vec![(sources[0].0.clone(), grouped)], true),
        None => (sources, false),
    };
    if let Some(out) = super::ranges::try_run(&sources, &opts, tuning, by_pane, &mut on_batch)? {
        return Ok(out);
    }
    let plans = plans(&sources, &opts, tuning)?;
    run_plans(&sources, &plans, opts, on_batch)
}

/// One time range of input taken to be sorted by time (see `super::ranges`) through the pane engine: `None`,
/// having run nothing, when its times are not sorted after all. The plan reads every piece's times anyway and
/// finds whether they never decrease, so the range needs no pass of its own to check (a pass over each
/// range's times took some 4% of a two-thread call).
pub(super) fn window_aggregate_sorted(
    sources: Vec<(SchemaRef, Vec<RecordBatch>)>,
    opts: WindowAggregateOptions,
    tuning: Tuning,
    on_batch: impl FnMut() -> Result<()>,
) -> Result<Option<BatchOutput>> {
    let plans = plans(&sources, &opts, tuning)?;
    if !plans.iter().all(|plan| sorted(plan)) {
        return Ok(None);
    }
    run_plans(&sources, &plans, opts, on_batch).map(Some)
}

/// Every source's pieces ([`plan`]).
fn plans(
    sources: &[(SchemaRef, Vec<RecordBatch>)],
    opts: &WindowAggregateOptions,
    tuning: Tuning,
) -> Result<Vec<Vec<Piece>>> {
    (sources.iter())
        .map(|(_, batches)| plan(batches, &opts.time, tuning.piece_rows.max(1)))
        .collect()
}

/// Whether a source's times never decrease: within each piece, and from each piece's last to the next one's
/// first.
fn sorted(plan: &[Piece]) -> bool {
    plan.iter().all(|p| p.sorted)
        && (plan.windows(2)).all(|w| match (w[0].range, w[1].range) {
            (Some((_, last)), Some((first, _))) => last <= first,
            _ => false,
        })
}

/// Pushes every source's pieces through one operator, then the end of the stream.
fn run_plans(
    sources: &[(SchemaRef, Vec<RecordBatch>)],
    plans: &[Vec<Piece>],
    opts: WindowAggregateOptions,
    mut on_batch: impl FnMut() -> Result<()>,
) -> Result<BatchOutput> {
    let rows: usize = plans.iter().flatten().map(|p| p.len).sum();
    let mut agg = WindowAggregator::for_batch(opts, sources.len())?;
    if rows >= AUTO_FARM_ROWS {
        agg.prefer_farm();
    }
    for (s, plan) in plans.iter().enumerate() {
        agg.promise(s, plan.first().map_or(i64::MAX, |p| p.least_from_here));
    }
    let mut out = vec![];
    for (s, ((schema, batches), plan)) in sources.iter().zip(plans).enumerate() {
        agg.bind_source(s, schema)?;
        for (i, p) in plan.iter().enumerate() {
            on_batch()?;
            let piece = batches[p.batch].slice(p.start, p.len);
            let pushed = match p.range {
                Some(range) => agg.push_in_range(&piece, s, range, p.sorted)?,
                None => agg.push(&piece, s)?,
            };
            keep(&mut out, pushed);
            let next = plan.get(i + 1).map_or(i64::MAX, |n| n.least_from_here);
            agg.promise(s, next);
        }
    }
    finish(agg, out)
}

/// A slice of one source's input and the least time of every row from its start to the source's end.
struct Piece {
    batch: usize,
    start: usize,
    len: usize,
    /// `i64::MAX` when no row from here on has a time (nothing left can reach a window).
    least_from_here: i64,
    /// The piece's least and greatest time when it has no null time (handed to admission, which would read
    /// the times again for them).
    range: Option<(i64, i64)>,
    /// With `range`: whether the piece's times never decrease (the pane engine then finds its pane runs by
    /// search, and a time range trusts its cut; see [`sorted`]).
    sorted: bool,
}

/// Cuts a source's batches into pieces of at most `rows` rows and finds each one's least time still to come.
/// Null times are skipped: such rows are dropped or rejected by the operator, never placed in a window.
fn plan(batches: &[RecordBatch], time: &str, rows: usize) -> Result<Vec<Piece>> {
    let mut pieces = vec![];
    for (b, batch) in batches.iter().enumerate() {
        let col = column(batch, time, "time")?;
        let ts = as_i64(col, time)?;
        let nulls = col.logical_nulls();
        let mut start = 0;
        while start < batch.num_rows() {
            let len = rows.min(batch.num_rows() - start);
            let read = match &nulls {
                None => min_max_sorted(&ts[start..start + len]),
                Some(_) => None,
            };
            let range = read.map(|(lo, hi, _)| (lo, hi));
            let least = match &nulls {
                None => range.map(|(lo, _)| lo),
                Some(n) => (start..start + len)
                    .filter(|&i| n.is_valid(i))
                    .map(|i| ts[i])
                    .min(),
            }
            .unwrap_or(i64::MAX);
            pieces.push(Piece {
                batch: b,
                start,
                len,
                least_from_here: least,
                range,
                sorted: read.is_some_and(|r| r.2),
            });
            start += len;
        }
    }
    let mut least = i64::MAX;
    for p in pieces.iter_mut().rev() {
        least = least.min(p.least_from_here);
        p.least_from_here = least;
    }
    Ok(pieces)
}

fn keep(out: &mut Vec<RecordBatch>, batch: RecordBatch) {
    if batch.num_rows() > 0 {
        out.push(batch);
    }
}

fn finish(mut agg: WindowAggregator, mut out: Vec<RecordBatch>) -> Result<BatchOutput> {
    out.push(agg.flush()?);
    Ok(BatchOutput {
        schema: agg.output_schema().expect("bound"),
        batches: out,
        late: agg.take_late_rows()?,
    })
}
