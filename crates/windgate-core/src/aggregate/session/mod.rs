//! Session windows (`gap=`): per key, the rows whose times lie closer than `gap` to each other form one
//! session `[first row's time, last row's time + gap)`, as Spark's `session_window(col, gap)`
//! (`docs/architecture.md`, "Session windows").
//!
//! Every admitted row at time `t` stands for the closed interval `[t, t + gap]`; a key's sessions are the
//! connected components of the union of its rows' intervals, each reported as the half-open window
//! `[least time, greatest time + gap)`. So rows sorted by time fall into the same session while each one's
//! time is at most the session's end so far (the previous row's time plus `gap`): a row exactly at a
//! session's end joins it, as in Spark (whose `session_window` merges a row whose time equals the session's
//! end; `tests/test_spark_sessions.py` checks it against pyspark). The sessions of a key are a function of
//! the *set* of its admitted rows, whatever their arrival order: a row arriving out of order within the
//! lateness bound may extend a session backwards or bridge two sessions into one.
//!
//! A session is final once the watermark passes its end (`end < watermark`): every row still to come has a
//! time at or above the watermark, so it can neither reach the session nor bridge it to another. Final
//! sessions are emitted in the order `(window_end, window_start, key)` (keys ascending, nulls first, as every
//! operator orders them); since every session still open ends at or after the watermark, the concatenated
//! output of a stream is in that order too, for any batch split.
//!
//! Two engines behind one operator ([`SessionAggregator`]): the streaming engine ([`engine`], per key an
//! ordered map of open sessions) and the reference engine ([`reference`], every row kept, sorted and cut at
//! each emission), which `strategy="reference"` runs and the tests compare against.

mod engine;
mod key_sessions;
mod operator;
mod reference;
mod workers;

pub use operator::{SESSION_OPERATOR, SessionAggregator, session_aggregate};

use super::options::WindowAggregateOptions;
use super::partial::{InputKind, OutputKind};
use crate::error::{Error, Result};
use crate::time::Span;

/// A session closed by the watermark, before its aggregates are lowered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Closed {
    pub key: u32,
    pub start: i64,
    pub end: i64,
    /// The session's slot in its engine's store.
    pub slot: u32,
}

/// Checks the options of session windows (`opts.gap` is `gap`) before any data is seen.
pub(crate) fn validate(opts: &WindowAggregateOptions, gap: &Span) -> Result<()> {
    if opts.time.is_empty() {
        return Err(Error::param("time", "expected the name of the time column"));
    }
    gap.check("gap")?;
    if let Span::Units(g) = gap {
        positive_gap(*g)?;
    }
    if opts.slide.is_some() {
        return Err(Error::param(
            "gap",
            "gap= (session windows) and slide= (sliding windows) exclude each other: give one of them",
        ));
    }
    if opts.offset != Span::Units(0) {
        return Err(Error::param(
            "gap",
            "gap= (session windows) and offset= (a shift of the window grid) exclude each other: sessions \
             have no grid",
        ));
    }
    if opts.input != InputKind::Rows || opts.output != OutputKind::Windows {
        return Err(Error::param(
            "gap",
            "gap= (session windows) takes raw rows and emits sessions: input=\"partials\" and \
             output=\"partials\" are for sliding windows only",
        ));
    }
    if opts.allowed_lateness.is_some() || opts.emit != super::options::Emit::Final {
        return Err(Error::param(
            if opts.allowed_lateness.is_some() {
                "allowed_lateness"
            } else {
                "emit"
            },
            "the update mode (allowed_lateness, emit=\"early\") fires sliding and tumbling windows again; \
             session windows (gap=) fire once, when the watermark passes their end",
        ));
    }
    super::front::validate_run(opts, "session windows (gap=)", false)
}

/// Whether a session ending at `end` is final under `watermark` (`i64::MAX`: the end of the stream).
pub(crate) fn is_final(end: i64, watermark: i64) -> bool {
    end < watermark || watermark == i64::MAX
}

/// `gap` in time units must be positive.
pub(crate) fn positive_gap(gap: i64) -> Result<i64> {
    if gap <= 0 {
        return Err(Error::param(
            "gap",
            format!("expected a positive duration (the inactivity gap of a session), got {gap}"),
        ));
    }
    Ok(gap)
}
