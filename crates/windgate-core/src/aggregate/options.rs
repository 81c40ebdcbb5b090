//! The parameters of `window_aggregate` / `WindowAggregator`, validated before any data is seen.

use arrow_schema::DataType;

use crate::error::{Error, Result};
use crate::order::admission::{DEFAULT_CREDITS, NullTime, OnLate};
use crate::order::kslack::{Lateness, LatenessOpt};
use crate::threads::MAX_THREADS;
use crate::time::{Span, TimeUnit};
use crate::window_options::{FarmOptions, ResolvedWindow, WindowOptions};

use super::function::AggSpec;
use super::partial::{InputKind, OutputKind};

/// Which engine runs the query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// The fastest correct engine for the call (measured: today the pane engine; see the operator).
    Auto,
    /// The plain reference engine (the test oracle).
    Reference,
    /// The single-threaded pane engine (PLQ and WLQ in the caller's thread).
    Pane,
    /// The parallel pane farm (seed 004): PLQ and WLQ worker farms, AS_PID and WIN_FB by default.
    Farm,
    /// The thesis' Round-Robin-Cyclic Pane-based approach (seed 003), in its line form.
    Rrcpa,
    /// Baselines of seed 003: the handshake approach (hash-owned windows on a line of PUs).
    Hsa,
    /// Baselines of seed 003: the round-robin approach (window k on PU k mod P, on a line of PUs).
    Rra,
    /// Baselines of seed 003: the hash-once approach (HSA's ownership on a ring of PUs fed by the input, the
    /// hash computed once by the ingress PU).
    Hoa,
    /// Baselines of seed 003: the round-robin-cyclic approach (RRA's ownership on HOA's ring).
    Rrca,
    Mq,
    MqLf,
    TuMlSc,
    TuMlMc,
    WiMl,
}

impl Strategy {
    pub const NAMES: [&str; 14] = [
        "auto",
        "reference",
        "pane",
        "farm",
        "rrcpa",
        "hsa",
        "rra",
        "hoa",
        "rrca",
        "mq",
        "mqlf",
        "tumlsc",
        "tumlmc",
        "wiml",
    ];

    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "auto" => Ok(Strategy::Auto),
            "reference" => Ok(Strategy::Reference),
            "pane" => Ok(Strategy::Pane),
            "farm" => Ok(Strategy::Farm),
            "rrcpa" => Ok(Strategy::Rrcpa),
            "hsa" => Ok(Strategy::Hsa),
            "rra" => Ok(Strategy::Rra),
            "hoa" => Ok(Strategy::Hoa),
            "rrca" => Ok(Strategy::Rrca),
            "mq" => Ok(Strategy::Mq),
            "mqlf" => Ok(Strategy::MqLf),
            "tumlsc" => Ok(Strategy::TuMlSc),
            "tumlmc" => Ok(Strategy::TuMlMc),
            "wiml" => Ok(Strategy::WiMl),
            other => Err(Error::param(
                "strategy",
                format!(
                    "unknown strategy {other:?}; expected one of {:?}",
                    Self::NAMES
                ),
            )),
        }
    }
}

/// Everything `window_aggregate` takes besides the data: the window parameters every windowed operator takes
/// ([`WindowOptions`], flattened here), the aggregates and the engine, and the multi-source parameters.
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
    /// source holds the watermark back) before its pushes are refused with a backpressure error. `None`:
    /// unbounded.
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
            size: self.size.clone(),
            slide: self.slide.clone(),
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
            .resolve_with(time_type, |unit| self.lateness_policy(unit))
    }

    /// The lateness policy of each source once the time unit is known.
    pub fn lateness_policy(&self, unit: TimeUnit) -> Result<Lateness> {
        Ok(match &self.lateness {
            LatenessOpt::Exact if self.strategy.is_multiway() => Lateness::Sorted,
            LatenessOpt::Exact if self.sources > 1 && self.gate_sources => Lateness::Sorted,
            other => other.policy(unit)?,
        })
    }
}

impl Strategy {
    /// Runs on worker threads (the farm, RRCPA, the line and the ring baselines).
    pub fn is_parallel(self) -> bool {
        matches!(
            self,
            Strategy::Farm
                | Strategy::Rrcpa
                | Strategy::Hsa
                | Strategy::Rra
                | Strategy::Hoa
                | Strategy::Rrca
        ) || self.is_multiway()
    }

    /// Seed 000's designs: an input thread per source merging time-sorted sources (brief 000 §2).
    pub fn is_multiway(self) -> bool {
        matches!(
            self,
            Strategy::Mq | Strategy::MqLf | Strategy::TuMlSc | Strategy::TuMlMc | Strategy::WiMl
        )
    }
}
