//! The parameters of `window_aggregate` / `WindowAggregator`, validated before any data is seen.

use arrow_schema::DataType;

use crate::error::{Error, Result};
use crate::order::admission::{DEFAULT_CREDITS, NullTime, OnLate};
use crate::order::kslack::{Lateness, LatenessOpt};
use crate::threads::MAX_THREADS;
use crate::time::calendar::month_placeholder;
use crate::time::{Span, TimeUnit};
use crate::window_options::{FarmOptions, ResolvedWindow, WindowOptions};

use super::function::AggSpec;
use super::partial::{InputKind, OutputKind};
pub use super::strategy::Strategy;

/// Everything `window_aggregate` takes besides the data: the window parameters every windowed operator takes
/// ([`WindowOptions`], flattened here), the aggregates and the engine, and the multi-source parameters.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
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
    /// source holds the watermark back) before its pushes are refused with a backpressure error. `None`:
    /// unbounded.
    pub credits: Option<u64>,
    /// An integer or timestamp column that orders rows of equal time for `first` and `last` (before the
    /// source and arrival do): with it, splitting the same rows over any number of sources gives the same
    /// result.
    pub order_by: Option<String>,
    /// Raw rows, or the partial states of another operator with the same query (see `aggregate::partial`).
    pub input: InputKind,
    /// Windows, or the partial states of final panes (see `aggregate::partial`).
    pub output: OutputKind,
    /// Arrival number of the first row of every source: rows pushed elsewhere first (a Spark task's
    /// partition within the whole input) keep their place in the order that breaks `first`/`last` ties.
    pub row_offset: u64,
    /// Session windows (`docs/architecture.md`, "Session windows"): the inactivity gap, instead of `size` and
    /// `slide`. Run by [`super::session::SessionAggregator`]; `None` for sliding and tumbling windows.
    #[serde(default)]
    pub gap: Option<Span>,
    /// Count windows (`docs/architecture.md`, "Count windows"): rows per window, instead of `size`, `slide`
    /// and `gap`. Run by [`super::count_window::CountWindowAggregator`]. Left out of snapshots when unset, so
    /// that snapshots of earlier versions match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows: Option<u64>,
    /// Count windows: rows between firings (`None`: `rows`, tumbling count windows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows_slide: Option<u64>,
    /// How long a fired window still takes late rows, firing again with each (see `aggregate::updates`).
    /// Left out of snapshots when unset, so that snapshots of earlier versions match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_lateness: Option<Span>,
    /// When windows fire: once, when final (the default), or also early (see `aggregate::updates`).
    #[serde(default, skip_serializing_if = "Emit::is_final")]
    pub emit: Emit,
    /// `tz=`: windows of whole days follow this zone's local days (see `time::calendar`). Left out of
    /// snapshots when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tz: Option<String>,
}

/// `emit=`: when windows fire.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Emit {
    /// Once, when the watermark passes the window's end.
    #[default]
    Final,
    /// Also each time the watermark crosses a multiple of this interval, with the open windows' partial
    /// results, marked not final.
    Early(Span),
}

impl Emit {
    fn is_final(&self) -> bool {
        *self == Emit::Final
    }

    /// `emit="final"` or `emit="early"` with its `interval`.
    pub fn parse(name: &str, interval: Option<Span>) -> Result<Self> {
        match (name, interval) {
            ("final", None) => Ok(Emit::Final),
            ("early", Some(i)) => Ok(Emit::Early(i)),
            ("early", None) => Err(Error::param(
                "interval",
                "emit=\"early\" fires open windows every interval of event time: give interval= (e.g. \"10s\")",
            )),
            ("final", Some(_)) => Err(Error::param(
                "interval",
                "interval= is the period of emit=\"early\"; with emit=\"final\" leave it unset",
            )),
            (other, _) => Err(Error::param(
                "emit",
                format!("expected \"final\" or \"early\", got {other:?}"),
            )),
        }
    }
}

/// Most sources of one operator: each keeps a K-slack, a watermark and credits of its own.
pub const MAX_SOURCES: usize = 1 << 16;

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
            allowed_lateness: None,
            emit: Emit::Final,
            gap: None,
            rows: None,
            rows_slide: None,
            tz: None,
        }
    }

    /// Options of session windows with inactivity gap `gap` and the defaults of the Python API (`size` is
    /// not read).
    pub fn session(time: impl Into<String>, gap: Span, aggs: Vec<(String, Vec<String>)>) -> Self {
        Self {
            gap: Some(gap),
            ..Self::new(time, Span::Units(1), aggs)
        }
    }

    /// Options of count windows of `rows` rows sliding by `rows_slide` and the defaults of the Python API
    /// (`size` is not read).
    pub fn count(
        time: impl Into<String>,
        rows: u64,
        rows_slide: Option<u64>,
        aggs: Vec<(String, Vec<String>)>,
    ) -> Self {
        Self {
            rows: Some(rows),
            rows_slide,
            ..Self::new(time, Span::Units(1), aggs)
        }
    }

    /// Options from the window parameters every windowed operator takes, with the defaults of the Python API
    /// for the rest.
    pub fn from_window(w: WindowOptions, aggs: Vec<(String, Vec<String>)>) -> Self {
        Self {
            slide: w.slide,
            offset: w.offset,
            by: w.by,
            lateness: w.lateness,
            on_late: w.on_late,
            null_time: w.null_time,
            threads: w.threads,
            farm: w.farm,
            ..Self::new(w.time, w.size, aggs)
        }
    }

    /// The window parameters every windowed operator takes (a copy: validation and binding only).
    pub fn window(&self) -> WindowOptions {
        WindowOptions {
            time: self.time.clone(),
            // Months (`tz=` only) are validated and cut as coordinate months (`time::calendar`).
            size: month_placeholder(&self.size, self.tz.as_deref()),
            slide: (self.slide.as_ref()).map(|s| month_placeholder(s, self.tz.as_deref())),
            offset: self.offset.clone(),
            by: self.by.clone(),
            lateness: self.lateness.clone(),
            on_late: self.on_late,
            null_time: self.null_time,
            threads: self.threads,
            farm: self.farm.clone(),
        }
    }

    /// Checks everything that can be checked without the data; returns the parsed aggregates.
    pub fn validate(&self) -> Result<Vec<AggSpec>> {
        if let Some(tz) = &self.tz {
            crate::time::calendar::check_zone(tz)?;
            if self.gap.is_some() {
                return Err(Error::param(
                    "tz",
                    "session windows (gap=) have no calendar grid to align: leave tz unset",
                ));
            }
            if self.strategy.is_multiway() {
                return Err(Error::param(
                    "tz",
                    format!(
                        "strategy {:?} merges sources sorted by time, and wall time runs back at an autumn \
                         change: use another strategy with tz=",
                        self.strategy.name()
                    ),
                ));
            }
        }
        if let Some(rows) = self.rows {
            super::count_window::validate(self, rows)?;
            return AggSpec::parse_all(&self.aggs);
        }
        if self.rows_slide.is_some() {
            return Err(Error::param(
                "rows_slide",
                "rows_slide= is the slide of count windows: give rows= too",
            ));
        }
        if let Some(gap) = &self.gap {
            super::session::validate(self, gap)?;
            return AggSpec::parse_all(&self.aggs);
        }
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
        self.validate_updates()?;
        if self.input == InputKind::Partials && self.order_by.is_some() {
            return Err(Error::param(
                "order_by",
                "input=\"partials\" carries each state's order already: leave order_by unset",
            ));
        }
        AggSpec::parse_all(&self.aggs)
    }

    /// The update mode's parameters (`allowed_lateness`, `emit`): it runs on its own engine, over rows.
    fn validate_updates(&self) -> Result<()> {
        let param = match (&self.allowed_lateness, &self.emit) {
            (Some(l), _) => {
                l.check("allowed_lateness")?;
                "allowed_lateness"
            }
            (None, Emit::Early(_)) => "emit",
            (None, Emit::Final) => return Ok(()),
        };
        if let Emit::Early(i) = &self.emit {
            i.check("interval")?;
            if let Span::Units(i) = i
                && *i <= 0
            {
                return Err(Error::param(
                    "interval",
                    format!("expected a positive interval, got {i}"),
                ));
            }
        }
        if let Some(Span::Units(l)) = &self.allowed_lateness
            && *l < 0
        {
            return Err(Error::param(
                "allowed_lateness",
                format!("expected a duration >= 0, got {l}"),
            ));
        }
        if self.lateness == LatenessOpt::Exact {
            return Err(Error::param(
                param,
                format!(
                    "{param} works with a watermark: give lateness= too (without it nothing is late and \
                     every window fires once, at the end)"
                ),
            ));
        }
        if !matches!(self.strategy, Strategy::Auto | Strategy::Reference) {
            return Err(Error::param(
                "strategy",
                format!(
                    "{param} runs on the update-mode engine: expected \"auto\", got {:?}",
                    self.strategy.name()
                ),
            ));
        }
        if self.output == OutputKind::Partials || self.input == InputKind::Partials {
            return Err(Error::param(
                param,
                "the update mode takes rows and emits windows (input=\"rows\", output=\"windows\")",
            ));
        }
        Ok(())
    }

    /// Checks everything but `aggs` and `strategy`.
    pub fn validate_window(&self) -> Result<()> {
        let window = self.window();
        window.validate_params()?;
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
        window.validate_by()
    }

    /// Resolves the window and the lateness against the input's time column (whose type is `time_type`).
    /// Returns the time unit, the window spec, the lateness policy and the type of `window_start`/`window_end`.
    pub fn resolve_window(&self, time_type: &DataType) -> Result<ResolvedWindow> {
        self.window()
            .resolve_with(time_type, |unit| self.lateness_policy(unit, &self.time))
    }

    /// `allowed_lateness` and `emit="early"`'s interval in the time column's unit.
    pub(crate) fn update_mode(&self, time_type: &DataType) -> Result<super::updates::UpdateMode> {
        let unit = crate::arrow_io::time_unit(time_type, &self.time)?;
        let allowed = self
            .allowed_lateness
            .as_ref()
            .map(|l| l.resolve(unit, &self.time, "allowed_lateness"))
            .transpose()?;
        let early = match &self.emit {
            Emit::Early(i) => Some(i.resolve(unit, &self.time, "interval")?),
            Emit::Final => None,
        };
        Ok(super::updates::UpdateMode { allowed, early })
    }

    /// The lateness policy of each source once the time unit is known.
    pub fn lateness_policy(&self, unit: TimeUnit, column: &str) -> Result<Lateness> {
        Ok(match &self.lateness {
            LatenessOpt::Exact if self.strategy.is_multiway() => Lateness::Sorted,
            LatenessOpt::Exact if self.sources > 1 && self.gate_sources => Lateness::Sorted,
            other => other.policy(unit, column)?,
        })
    }
}
