//! Count windows (`rows=`, `rows_slide=`): per key, a window fires at every `rows_slide`-th row of the key and
//! covers the key's last `rows` rows (fewer at the start), as Flink's `countWindow(size, slide)`, that is
//! `GlobalWindows` with `CountEvictor.of(size)` and `CountTrigger.of(slide)` (`docs/architecture.md`, "Count
//! windows").
//!
//! A key's rows are counted in the total order `(ts, order_by, source, seq)` every operator uses, not in
//! arrival order, so the windows do not depend on how the rows were split into batches or sources. A row's
//! place in that order is known once the watermark passes its time (every row still to come has a time at or
//! above the watermark): rows wait until then, and are released in the total order, each advancing its key's
//! count and firing the key's window when the count reaches a multiple of `rows_slide`. Windows come out in the
//! order of the rows that completed them, so the concatenated output of a stream is the same for any batch
//! split. As in Flink, the rows after a key's last firing never fire, not even at the end of the stream.
//!
//! Two engines behind one operator ([`CountWindowAggregator`]): the streaming engine ([`engine`], per key the
//! partial states of its last rows in panes of `gcd(rows, rows_slide)` rows) and the reference engine
//! ([`reference`], every row kept, sorted and cut at each emission), which `strategy="reference"` runs and the
//! tests compare against.

mod engine;
mod operator;
mod reference;

pub use operator::{COUNT_WINDOW_OPERATOR, CountWindowAggregator, count_window_aggregate};

use super::options::{Emit, WindowAggregateOptions};
use super::partial::{InputKind, OutputKind};
use crate::error::{Error, Result};
use crate::time::Span;

/// Largest `rows` and `rows_slide`: far above any window that fits in memory, low enough that counts never
/// overflow.
pub const MAX_ROWS: u64 = 1 << 48;

/// A window that fired, before its aggregates are lowered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fired {
    pub key: u32,
    /// Times of the first and last row the window covers.
    pub first: i64,
    pub last: i64,
    /// How many rows it covers: `min(rows, the key's rows so far)`.
    pub rows: u64,
    /// The window's slot in its engine's store (released by the engine's `release`).
    pub slot: u32,
}

/// `rows` and `rows_slide` as the engines take them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Counts {
    pub size: u64,
    pub slide: u64,
}

impl Counts {
    /// Rows per pane: every window starts and ends on a multiple of it.
    pub fn pane(&self) -> u64 {
        gcd(self.size, self.slide)
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// The counts of `opts` (whose `rows` is set).
pub(crate) fn counts(opts: &WindowAggregateOptions) -> Counts {
    let size = opts.rows.expect("count windows have rows");
    Counts {
        size,
        slide: opts.rows_slide.unwrap_or(size),
    }
}

fn count_param(param: &str, value: u64) -> Result<()> {
    if value == 0 || value > MAX_ROWS {
        return Err(Error::param(
            param,
            format!("expected a positive number of rows up to 2**48, got {value}"),
        ));
    }
    Ok(())
}

/// Checks the options of count windows (`opts.rows` is set) before any data is seen.
pub(crate) fn validate(opts: &WindowAggregateOptions, rows: u64) -> Result<()> {
    if opts.time.is_empty() {
        return Err(Error::param("time", "expected the name of the time column"));
    }
    count_param("rows", rows)?;
    if let Some(s) = opts.rows_slide {
        count_param("rows_slide", s)?;
    }
    let refuse = |param: &str, what: &str| {
        Err(Error::param(
            param,
            format!("count windows (rows=) take no {what}"),
        ))
    };
    if opts.gap.is_some() {
        return refuse("gap", "gap= (session windows): give one of rows and gap");
    }
    if opts.slide.is_some() {
        return refuse(
            "slide",
            "slide= (a slide in time): the slide in rows is rows_slide=",
        );
    }
    if opts.tz.is_some() {
        return refuse(
            "tz",
            "tz= (a calendar grid in a time zone): they have no grid",
        );
    }
    if opts.offset != Span::Units(0) {
        return refuse(
            "offset",
            "offset= (a shift of the time grid): they have no grid",
        );
    }
    if opts.input != InputKind::Rows {
        return refuse("input", "input=\"partials\": they take raw rows");
    }
    if opts.output != OutputKind::Windows {
        return refuse("output", "output=\"partials\": they emit windows");
    }
    if opts.allowed_lateness.is_some() {
        return refuse(
            "allowed_lateness",
            "allowed_lateness: a window fires once, when the watermark has passed the row that completes it",
        );
    }
    if opts.emit != Emit::Final {
        return refuse("emit", "emit=\"early\": a window fires once");
    }
    super::front::validate_run(opts, "count windows (rows=)", true)
}

/// Whether a row at time `ts` has its final place in the total order under `watermark` (`i64::MAX`: the end
/// of the stream).
pub(crate) fn is_released(ts: i64, watermark: i64) -> bool {
    ts < watermark || watermark == i64::MAX
}
