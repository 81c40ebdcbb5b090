//! The parameters of `window_aggregate` / `WindowAggregator`, validated before any data is seen.

use std::time::Duration;

use arrow_schema::DataType;

use crate::arrow_io::time_unit;
use crate::error::{Error, Result};
use crate::order::kslack::Lateness;
use crate::runtime::farm::{FarmConfig, WindowSchedulerKind};
use crate::runtime::pane_scheduler::PaneSchedulerKind;
use crate::time::{TimeUnit, WindowSpec, parse_duration};

use super::function::AggSpec;
use super::partial::{InputKind, OutputKind};
pub use super::strategy::Strategy;

/// A length of time: an integer in the time column's unit, or a duration string resolved once the unit is
/// known (at the first batch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Span {
    Units(i64),
    Text(String),
}

impl Span {
    pub fn resolve(&self, unit: TimeUnit, param: &str) -> Result<i64> {
        match self {
            Span::Units(v) => Ok(*v),
            Span::Text(t) => parse_duration(t, unit, param),
        }
    }

    /// Early syntax check of a duration string (the unit is not known yet).
    pub(crate) fn check(&self, param: &str) -> Result<()> {
        if let Span::Text(t) = self {
            parse_duration(t, TimeUnit::Nanosecond, param)?;
        }
        Ok(())
    }
}

/// `lateness=`: `None`, a bound, or `"adaptive"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LatenessOpt {
    Exact,
    Bound(Span),
    Adaptive,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnLate {
    Drop,
    Error,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NullTime {
    Error,
    Drop,
}

impl OnLate {
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "drop" => Ok(OnLate::Drop),
            "error" => Ok(OnLate::Error),
            other => Err(Error::param(
                "on_late",
                format!("expected \"drop\" or \"error\", got {other:?}"),
            )),
        }
    }
}

impl NullTime {
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "error" => Ok(NullTime::Error),
            "drop" => Ok(NullTime::Drop),
            other => Err(Error::param(
                "null_time",
                format!("expected \"error\" or \"drop\", got {other:?}"),
            )),
        }
    }
}

/// The pane farm's knobs (its pane and window schedulers, as in Mencagli et al. 2017); they change who
/// computes what, never the result.
#[derive(Debug, Clone, PartialEq)]
pub struct FarmOptions {
    pub scheduler: PaneSchedulerKind,
    pub window_scheduler: WindowSchedulerKind,
    /// A fixed pane split threshold in rows instead of `alpha * theta_b` (small values force splitting).
    pub split_threshold: Option<u64>,
    /// The PID's utilisation set-point.
    pub setpoint: f64,
    /// The PID's sampling interval T.
    pub sample_interval: Duration,
}

impl Default for FarmOptions {
    fn default() -> Self {
        Self {
            scheduler: PaneSchedulerKind::AsPid,
            window_scheduler: WindowSchedulerKind::WinFb,
            split_threshold: None,
            setpoint: 0.9,
            sample_interval: Duration::from_secs(1),
        }
    }
}

impl FarmOptions {
    pub fn config(&self, threads: usize) -> FarmConfig {
        let mut cfg = FarmConfig::new(threads);
        cfg.scheduler = self.scheduler;
        cfg.window_scheduler = self.window_scheduler;
        cfg.split_threshold = self.split_threshold;
        cfg.pid.setpoint = self.setpoint;
        cfg.sample_interval = self.sample_interval;
        cfg
    }

    fn validate(&self) -> Result<()> {
        if !(self.setpoint > 0.0 && self.setpoint.is_finite()) {
            return Err(Error::param(
                "setpoint",
                format!(
                    "expected a positive utilisation set-point such as 0.9, got {}",
                    self.setpoint
                ),
            ));
        }
        if self.sample_interval.is_zero() {
            return Err(Error::param(
                "sample_interval",
                "expected a positive duration",
            ));
        }
        if self.split_threshold == Some(0) {
            return Err(Error::param(
                "split_threshold",
                "expected a positive number of rows or None (adaptive)",
            ));
        }
        Ok(())
    }
}

/// Everything `window_aggregate` takes besides the data.
/// The window parameters resolved against an input schema.
#[derive(Debug, Clone)]
pub struct ResolvedWindow {
    pub spec: WindowSpec,
    pub lateness: Lateness,
    /// The type of `window_start` and `window_end`: the time column's, int64 for plain integers.
    pub window_type: DataType,
}

#[derive(Debug, Clone)]
pub struct WindowAggregateOptions {
    pub time: String,
    pub size: Span,
    pub slide: Option<Span>,
    pub offset: Span,
    pub by: Vec<String>,
    pub aggs: Vec<(String, Vec<String>)>,
    pub lateness: LatenessOpt,
    pub on_late: OnLate,
    pub null_time: NullTime,
    /// `None`: all cores.
    pub threads: Option<usize>,
    pub strategy: Strategy,
    pub farm: FarmOptions,
    /// Number of sources pushed to (`push(batch, source)`).
    pub sources: usize,
    /// With several sources and no lateness: merge them by readiness (each must be sorted by time) instead of
    /// holding every window until the end. Streaming operators want this; the batch function is exact.
    pub gate_sources: bool,
    /// Streaming, several sources: rows a source may have pending (pushed, not yet final because another
    /// source holds the watermark back) before its pushes are refused with a backpressure error
    /// (`docs/architecture.md`, "Contracts"). `None`: unbounded.
    pub credits: Option<u64>,
    /// An integer or timestamp column that orders rows of equal time for `first` and `last` (before the
    /// source and arrival do): with it, splitting the same rows over any number of sources gives the same
    /// result.
    pub order_by: Option<String>,
    /// Raw rows, or the partial states of another operator with the same query (see [`super::partial`]).
    pub input: InputKind,
    /// Windows, or the partial states of final panes (see [`super::partial`]).
    pub output: OutputKind,
    /// Arrival number of the first row of every source: rows pushed elsewhere first (a Spark task's
    /// partition within the whole input) keep their place in the order that breaks `first`/`last` ties.
    pub row_offset: u64,
}

/// Most worker threads of one operator (and sources of a design that runs a thread per source).
pub const MAX_THREADS: usize = 254;

/// Most sources of one operator: each keeps a K-slack, a watermark and credits of its own.
pub const MAX_SOURCES: usize = 1 << 16;

/// Default [`WindowAggregateOptions::credits`]: about a million rows per source, a few tens of MB of
/// pending state, far above any skew between live sources, well below an out-of-memory.
pub const DEFAULT_CREDITS: u64 = 1 << 20;

impl WindowAggregateOptions {
    /// Options with the defaults of the Python API.
    pub fn new(time: impl Into<String>, size: Span, aggs: Vec<(String, Vec<String>)>) -> Self {
        Self {
            time: time.into(),
            size,
            slide: None,
            offset: Span::Units(0),
            by: vec![],
            aggs,
            lateness: LatenessOpt::Exact,
            on_late: OnLate::Drop,
            null_time: NullTime::Error,
            threads: None,
            strategy: Strategy::Auto,
            farm: FarmOptions::default(),
            sources: 1,
            gate_sources: true,
            credits: Some(DEFAULT_CREDITS),
            order_by: None,
            input: InputKind::Rows,
            output: OutputKind::Windows,
            row_offset: 0,
        }
    }

    /// Checks everything that can be checked without the data; returns the parsed aggregates.
    pub fn validate(&self) -> Result<Vec<AggSpec>> {
        self.validate_window()?;
        if self.output == OutputKind::Partials
            && !matches!(self.strategy, Strategy::Auto | Strategy::Pane)
        {
            return Err(Error::param(
                "strategy",
                format!(
                    "output=\"partials\" runs on the pane engine: expected \"auto\" or \"pane\", got {:?}",
                    self.strategy.name()
                ),
            ));
        }
        if self.input == InputKind::Partials && self.order_by.is_some() {
            return Err(Error::param(
                "order_by",
                "input=\"partials\" carries each state's order already: leave order_by unset",
            ));
        }
        AggSpec::parse_all(&self.aggs)
    }

    /// Checks everything but `aggs` and `strategy`: the window, lateness, threads, farm and grouping
    /// parameters other windowed operators (the preference queries) share.
    pub fn validate_window(&self) -> Result<()> {
        if self.time.is_empty() {
            return Err(Error::param("time", "expected the name of the time column"));
        }
        self.size.check("size")?;
        if let Some(s) = &self.slide {
            s.check("slide")?;
        }
        self.offset.check("offset")?;
        if let LatenessOpt::Bound(k) = &self.lateness {
            k.check("lateness")?;
            if let Span::Units(k) = k {
                Lateness::fixed(*k)?;
            }
        }
        if let (Span::Units(size), slide) = (&self.size, &self.slide) {
            let slide = match slide {
                Some(Span::Units(s)) => Some(*s),
                Some(Span::Text(_)) => None,
                None => Some(*size),
            };
            if let Some(slide) = slide {
                WindowSpec::new(*size, Some(slide), 0)?;
            } else if *size <= 0 {
                WindowSpec::new(*size, None, 0)?;
            }
        }
        if self.threads == Some(0) {
            return Err(Error::param(
                "threads",
                "expected a positive number of threads or None (all cores)",
            ));
        }
        if self.threads.is_some_and(|t| t > MAX_THREADS) {
            return Err(Error::param(
                "threads",
                format!("expected at most {MAX_THREADS} threads"),
            ));
        }
        self.farm.validate()?;
        if self.order_by.as_deref() == Some("") {
            return Err(Error::param("order_by", "expected a column name"));
        }
        if self.credits == Some(0) {
            return Err(Error::param(
                "credits",
                "expected at least 1 row (or None: unbounded)",
            ));
        }
        if self.sources == 0 {
            return Err(Error::param("sources", "expected at least one source"));
        }
        if self.sources > MAX_SOURCES {
            return Err(Error::param(
                "sources",
                format!(
                    "expected at most {MAX_SOURCES} sources, got {} (each keeps its own watermark)",
                    self.sources
                ),
            ));
        }
        if self.strategy.is_multiway() && self.sources > MAX_THREADS {
            return Err(Error::param(
                "sources",
                format!(
                    "strategy {:?} runs a thread per source: at most {MAX_THREADS} sources, got {}",
                    self.strategy.name(),
                    self.sources
                ),
            ));
        }
        if self.strategy.is_multiway() && self.lateness != LatenessOpt::Exact {
            return Err(Error::param(
                "lateness",
                format!(
                    "strategy {:?} merges time-sorted sources; lateness must be None",
                    self.strategy.name()
                ),
            ));
        }
        for (i, b) in self.by.iter().enumerate() {
            if self.by[..i].contains(b) {
                return Err(Error::param("by", format!("column '{b}' is listed twice")));
            }
        }
        Ok(())
    }

    /// Resolves the window and the lateness against the input's time column (whose type is `time_type`).
    /// Returns the time unit, the window spec, the lateness policy and the type of `window_start`/`window_end`.
    pub fn resolve_window(&self, time_type: &DataType) -> Result<ResolvedWindow> {
        let unit = time_unit(time_type, &self.time)?;
        let size = self.size.resolve(unit, "size")?;
        let slide = self
            .slide
            .as_ref()
            .map(|s| s.resolve(unit, "slide"))
            .transpose()?;
        let offset = self.offset.resolve(unit, "offset")?;
        Ok(ResolvedWindow {
            spec: WindowSpec::new(size, slide, offset)?,
            lateness: self.lateness_policy(unit)?,
            window_type: if unit == TimeUnit::Plain {
                DataType::Int64
            } else {
                time_type.clone()
            },
        })
    }

    /// The lateness policy of each source once the time unit is known.
    pub fn lateness_policy(&self, unit: TimeUnit) -> Result<Lateness> {
        Ok(match &self.lateness {
            LatenessOpt::Exact if self.strategy.is_multiway() => Lateness::Sorted,
            LatenessOpt::Exact if self.sources > 1 && self.gate_sources => Lateness::Sorted,
            LatenessOpt::Exact => Lateness::Exact,
            LatenessOpt::Adaptive => Lateness::Adaptive,
            LatenessOpt::Bound(k) => Lateness::fixed(k.resolve(unit, "lateness")?)?,
        })
    }
}

/// The threads a call runs on: `threads`, or every core.
pub fn resolve_threads(threads: Option<usize>) -> usize {
    threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}
