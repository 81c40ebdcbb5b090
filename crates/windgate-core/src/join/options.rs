//! The parameters of `band_join` / `BandJoiner`, validated before any data is seen.

use crate::error::{Error, Result};
use crate::order::admission::{DEFAULT_CREDITS, OnLate};
use crate::order::kslack::{Lateness, LatenessOpt};
use crate::threads::{MAX_THREADS, resolve_threads};
use crate::time::{Span, TimeUnit};

use super::prepare::Side;
pub use super::strategy::JoinStrategy;

/// One join predicate; a pair matches when every predicate holds (AND).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Predicate {
    /// `|left - right| <= eps`, compared as float64.
    Band {
        left: String,
        right: String,
        eps: f64,
    },
    /// `left == right` (SQL: a null never equals anything).
    Eq { left: String, right: String },
}

/// Which pairs a join emits (Gulisano et al., ScaleJoin).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Semantics {
    /// `l.ts + lower <= r.ts <= l.ts + upper` (`|l.ts - r.ts| <= window`) and the predicates: the pairs of
    /// an interval join (Flink's `between(lower, upper)`, Spark's `r.ts BETWEEN l.ts + lower AND l.ts + upper`).
    Interval,
    /// ScaleJoin's three-step procedure exactly: compare with the opposite window, store, purge the *own*
    /// window strictly below `ts - window`; pairs further apart than `window` can match.
    ScaleJoin,
}

impl Semantics {
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "interval" => Ok(Semantics::Interval),
            "scalejoin" => Ok(Semantics::ScaleJoin),
            other => Err(Error::param(
                "semantics",
                format!("expected \"interval\" or \"scalejoin\", got {other:?}"),
            )),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Semantics::Interval => "interval",
            Semantics::ScaleJoin => "scalejoin",
        }
    }
}

/// Which rows a join emits besides the matching pairs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum JoinHow {
    /// The matching pairs only.
    Inner,
    /// Also every left row without a matching right row, once, with nulls for the right columns.
    Left,
}

impl JoinHow {
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "inner" => Ok(JoinHow::Inner),
            "left" => Ok(JoinHow::Left),
            other => Err(Error::param(
                "how",
                format!("expected \"inner\" or \"left\", got {other:?}"),
            )),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            JoinHow::Inner => "inner",
            JoinHow::Left => "left",
        }
    }
}

/// The time bounds of a join in time units: a pair matches when `l.ts + lower <= r.ts <= l.ts + upper`.
/// `window = w` is `lower = -w, upper = w`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    pub lower: i64,
    pub upper: i64,
}

fn clamp(v: i128) -> i64 {
    v.clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

impl Bounds {
    pub fn symmetric(window: i64) -> Self {
        Bounds {
            lower: window.saturating_neg(),
            upper: window,
        }
    }

    /// Whether a left row at `l` and a right row at `r` are within the bounds (exact, no overflow).
    pub fn holds(&self, l: i64, r: i64) -> bool {
        let d = r as i128 - l as i128;
        self.lower as i128 <= d && d <= self.upper as i128
    }

    /// The retention horizon of `side` once a tuple at `ts` was processed: every later tuple has a time
    /// `>= ts`, so no future tuple of the other side can match a row of `side` below it. Left rows need
    /// `l.ts >= r.ts - upper`, right rows `r.ts >= l.ts + lower`.
    pub fn horizon(&self, side: Side, ts: i64) -> i64 {
        match side {
            Side::Left => clamp(ts as i128 - self.upper as i128),
            Side::Right => clamp(ts as i128 + self.lower as i128),
        }
    }

    /// The largest partner time a trigger of `side` at `ts` can match, when the horizon alone does not
    /// bound it (partners come earlier in the merged order): a right trigger needs `l.ts <= r.ts - lower`
    /// (binding when `lower > 0`), a left trigger `r.ts <= l.ts + upper` (binding when `upper < 0`).
    pub fn partner_max(&self, side: Side, ts: i64) -> Option<i128> {
        match side {
            Side::Right if self.lower > 0 => Some(ts as i128 - self.lower as i128),
            Side::Left if self.upper < 0 => Some(ts as i128 + self.upper as i128),
            _ => None,
        }
    }

    /// Whether a left row at `l` can still be matched once a tuple at `ts` was processed (a right row at
    /// `r >= ts` needs `r <= l + upper`).
    pub fn left_open(&self, l: i64, ts: i64) -> bool {
        ts as i128 <= l as i128 + self.upper as i128
    }
}

/// A signed length of time: an int, or a duration string with an optional leading `-` (`"-30s"`).
pub fn signed_units(span: &Span, unit: TimeUnit, column: &str, param: &str) -> Result<i64> {
    span.resolve_signed(unit, column, param)
}

/// Everything `band_join` and `BandJoiner` take (serialised whole into a checkpoint's parameters).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct BandJoinOptions {
    /// The time column of the left and of the right input.
    pub time: (String, String),
    /// `|l.ts - r.ts| <= window`; or `lower`/`upper` (exactly one of the two forms).
    pub window: Option<Span>,
    /// `l.ts + lower <= r.ts <= l.ts + upper` (signed lengths of time).
    pub lower: Option<Span>,
    pub upper: Option<Span>,
    pub how: JoinHow,
    pub on: Vec<Predicate>,
    /// `None`: all cores.
    pub threads: Option<usize>,
    pub lateness: LatenessOpt,
    pub on_late: OnLate,
    pub semantics: Semantics,
    /// A per-thread index (cells over the first band column, keyed by the equality columns) so that a thread
    /// compares only candidates, not its whole share of the window.
    pub index: bool,
    pub strategy: JoinStrategy,
    /// Streaming: rows a side may have pending (admitted past its own watermark, not yet ready because the
    /// other side holds readiness back) before its pushes are refused with a backpressure error. `None`:
    /// unbounded. The batch function is never refused.
    pub credits: Option<u64>,
}

impl BandJoinOptions {
    pub fn new(time: (String, String), window: Span, on: Vec<Predicate>) -> Self {
        Self {
            time,
            window: Some(window),
            lower: None,
            upper: None,
            how: JoinHow::Inner,
            on,
            threads: None,
            lateness: LatenessOpt::Exact,
            on_late: OnLate::Drop,
            semantics: Semantics::Interval,
            index: true,
            strategy: JoinStrategy::Auto,
            credits: Some(DEFAULT_CREDITS),
        }
    }

    /// Asymmetric bounds: `l.ts + lower <= r.ts <= l.ts + upper`.
    pub fn between(time: (String, String), lower: Span, upper: Span, on: Vec<Predicate>) -> Self {
        let mut o = Self::new(time, Span::Units(0), on);
        o.window = None;
        o.lower = Some(lower);
        o.upper = Some(upper);
        o
    }

    /// Checks what can be checked without data.
    pub fn validate(&self) -> Result<()> {
        match (&self.window, &self.lower, &self.upper) {
            (Some(w), None, None) => {
                w.check("window")?;
                if let Span::Units(w) = w
                    && *w < 0
                {
                    return Err(Error::param(
                        "window",
                        format!("expected a non-negative length of time, got {w}"),
                    ));
                }
            }
            (Some(_), _, _) => {
                return Err(Error::param(
                    "window",
                    "give either window= (symmetric) or lower= and upper=, not both",
                ));
            }
            (None, None, None) => {
                return Err(Error::param(
                    "window",
                    "expected window= (|l.ts - r.ts| <= window) or lower= and upper= \
                     (l.ts + lower <= r.ts <= l.ts + upper)",
                ));
            }
            (None, Some(_), None) => {
                return Err(Error::param("upper", "lower= needs upper= too"));
            }
            (None, None, Some(_)) => {
                return Err(Error::param("lower", "upper= needs lower= too"));
            }
            (None, Some(lo), Some(up)) => {
                // Duration strings are compared in nanoseconds here, and again in the time column's unit.
                lo.check("lower")?;
                up.check("upper")?;
                let both = match (lo, up) {
                    (Span::Units(l), Span::Units(u)) => Some((*l, *u)),
                    (Span::Text(_), Span::Text(_)) => Some((
                        signed_units(lo, TimeUnit::Nanosecond, &self.time.0, "lower")?,
                        signed_units(up, TimeUnit::Nanosecond, &self.time.0, "upper")?,
                    )),
                    _ => None,
                };
                if let Some((lo_ns, up_ns)) = both {
                    check_order(lo_ns, up_ns)?;
                    self.check_symmetric(lo_ns, up_ns)?;
                }
            }
        }
        crate::order::admission::refuse_keep(self.on_late, "the band join")?;
        match self.threads {
            Some(0) => {
                return Err(Error::param(
                    "threads",
                    "expected a positive int or None, got 0",
                ));
            }
            Some(t) if t > MAX_THREADS => {
                return Err(Error::param(
                    "threads",
                    format!("expected at most {MAX_THREADS} threads (or None: all cores), got {t}"),
                ));
            }
            _ => {}
        }
        if self.credits == Some(0) {
            return Err(Error::param(
                "credits",
                "expected at least 1 row (or None: unbounded), got 0",
            ));
        }
        for p in &self.on {
            if let Predicate::Band { left, right, eps } = p
                && !(eps.is_finite() && *eps >= 0.0)
            {
                return Err(Error::param(
                    "on",
                    format!(
                        "band({left:?}, {right:?}, eps): expected a finite eps >= 0, got {eps}"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// `threads`, or every core (at most [`MAX_THREADS`]).
    pub fn threads(&self) -> usize {
        resolve_threads(self.threads).min(MAX_THREADS)
    }

    /// The time bounds in time units, once the time column's unit is known.
    pub fn bounds(&self, unit: TimeUnit, column: &str) -> Result<Bounds> {
        if let (None, Some(lo), Some(up)) = (&self.window, &self.lower, &self.upper) {
            let lower = signed_units(lo, unit, column, "lower")?;
            let upper = signed_units(up, unit, column, "upper")?;
            check_order(lower, upper)?;
            self.check_symmetric(lower, upper)?;
            return Ok(Bounds { lower, upper });
        }
        let w = self
            .window
            .as_ref()
            .ok_or_else(|| Error::param("window", "expected window= or lower= and upper="))?
            .resolve(unit, column, "window")?;
        if w < 0 {
            return Err(Error::param(
                "window",
                format!("expected a non-negative length of time, got {w}"),
            ));
        }
        Ok(Bounds::symmetric(w))
    }

    /// ScaleJoin's own semantics purges both windows by one length: only symmetric bounds.
    fn check_symmetric(&self, lower: i64, upper: i64) -> Result<()> {
        if self.semantics == Semantics::ScaleJoin && (lower as i128) != -(upper as i128) {
            return Err(Error::param(
                "semantics",
                format!(
                    "\"scalejoin\" semantics needs symmetric bounds (lower = -upper, or window=), got \
                     lower={lower}, upper={upper}; use semantics=\"interval\" for asymmetric bounds"
                ),
            ));
        }
        Ok(())
    }

    pub fn lateness_policy(&self, unit: TimeUnit, column: &str) -> Result<Lateness> {
        self.lateness.policy(unit, column)
    }
}

fn check_order(lower: i64, upper: i64) -> Result<()> {
    if lower > upper {
        return Err(Error::param(
            "lower",
            format!("expected lower <= upper, got lower={lower} > upper={upper}"),
        ));
    }
    Ok(())
}
