//! The parameters of `band_join` / `BandJoiner` (DESIGN §5), validated before any data is seen.

use crate::aggregate::options::{DEFAULT_CREDITS, LatenessOpt, OnLate, Span, resolve_threads};
use crate::error::{Error, Result};
use crate::order::kslack::Lateness;
use crate::time::TimeUnit;

/// One join predicate; a pair matches when every predicate holds (AND).
#[derive(Debug, Clone, PartialEq)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Semantics {
    /// `|l.ts - r.ts| <= window` and the predicates: the pairs of an interval join (Flink, Spark).
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

/// Which engine runs the join; every one returns the reference's rows in the same order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JoinStrategy {
    /// `scalejoin` with more than one thread, else `serial`.
    Auto,
    /// ScaleGate in, `threads` processing threads, ScaleGate out (Gulisano et al., ScaleJoin).
    ScaleJoin,
    /// One processing thread's logic run inline on the caller's thread (no gates, no threads).
    Serial,
    /// The nested-loop three-step join over the merged stream: the oracle.
    Reference,
}

impl JoinStrategy {
    pub const NAMES: [&'static str; 4] = ["auto", "scalejoin", "serial", "reference"];

    pub fn parse(name: &str) -> Result<Self> {
        Ok(match name {
            "auto" => JoinStrategy::Auto,
            "scalejoin" => JoinStrategy::ScaleJoin,
            "serial" => JoinStrategy::Serial,
            "reference" => JoinStrategy::Reference,
            other => {
                return Err(Error::param(
                    "strategy",
                    format!("expected one of {:?}, got {other:?}", Self::NAMES),
                ));
            }
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            JoinStrategy::Auto => "auto",
            JoinStrategy::ScaleJoin => "scalejoin",
            JoinStrategy::Serial => "serial",
            JoinStrategy::Reference => "reference",
        }
    }

    /// The engine `auto` stands for with `threads` threads.
    pub fn resolve(self, threads: usize) -> Self {
        match self {
            JoinStrategy::Auto if threads > 1 => JoinStrategy::ScaleJoin,
            JoinStrategy::Auto => JoinStrategy::Serial,
            s => s,
        }
    }
}

/// The most processing threads a join starts: the bound `window_aggregate` and the other operators have.
pub const MAX_THREADS: usize = 254;

/// Everything `band_join` and `BandJoiner` take.
#[derive(Debug, Clone)]
pub struct BandJoinOptions {
    /// The time column of the left and of the right input.
    pub time: (String, String),
    pub window: Span,
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
            window,
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

    /// Checks what can be checked without data.
    pub fn validate(&self) -> Result<()> {
        self.window.check("window")?;
        if let Span::Units(w) = self.window
            && w < 0
        {
            return Err(Error::param(
                "window",
                format!("expected a non-negative length of time, got {w}"),
            ));
        }
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

    /// The window in time units, once the time column's unit is known.
    pub fn window_units(&self, unit: TimeUnit) -> Result<i64> {
        let w = self.window.resolve(unit, "window")?;
        if w < 0 {
            return Err(Error::param(
                "window",
                format!("expected a non-negative length of time, got {w}"),
            ));
        }
        Ok(w)
    }

    pub fn lateness_policy(&self, unit: TimeUnit) -> Result<Lateness> {
        Ok(match &self.lateness {
            LatenessOpt::Exact => Lateness::Exact,
            LatenessOpt::Adaptive => Lateness::Adaptive,
            LatenessOpt::Bound(k) => Lateness::fixed(k.resolve(unit, "lateness")?)?,
        })
    }
}
