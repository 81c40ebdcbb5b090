//! The window and stream parameters every windowed operator takes (window aggregation, the preference
//! queries): the time column, the window, the grouping, lateness, the late-row and null-time policies, threads
//! and the pane farm's knobs, validated before any data is seen and resolved against the input schema.

use std::time::Duration;

use arrow_schema::DataType;

use crate::arrow_io::time_unit;
use crate::error::{Error, Result};
use crate::order::admission::{NullTime, OnLate};
use crate::order::kslack::{Lateness, LatenessOpt};
use crate::runtime::farm::{FarmConfig, WindowSchedulerKind};
use crate::runtime::pane_scheduler::PaneSchedulerKind;
use crate::threads::MAX_THREADS;
use crate::time::{Span, TimeFormat, TimeUnit, WindowSpec};

/// The pane farm's knobs (the pane scheduler and window scheduler of Mencagli, Torquati, Danelutto, De Matteis,
/// *Parallel Continuous Preference Queries over Out-of-Order and Bursty Data Streams*); they change who
/// computes what, never the result.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
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

    pub(crate) fn validate(&self) -> Result<()> {
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

/// The window parameters resolved against an input schema.
#[derive(Debug, Clone)]
pub struct ResolvedWindow {
    pub spec: WindowSpec,
    pub lateness: Lateness,
    /// The type of `window_start` and `window_end`: the time column's, int64 for plain integers.
    pub window_type: DataType,
    /// How the time column's values read in stats and errors.
    pub format: TimeFormat,
}

/// The parameters of a windowed operator besides its query.
#[derive(Debug, Clone)]
pub struct WindowOptions {
    pub time: String,
    pub size: Span,
    pub slide: Option<Span>,
    pub offset: Span,
    pub by: Vec<String>,
    pub lateness: LatenessOpt,
    pub on_late: OnLate,
    pub null_time: NullTime,
    /// `None`: all cores.
    pub threads: Option<usize>,
    pub farm: FarmOptions,
}

impl WindowOptions {
    /// Options with the defaults of the Python API: tumbling windows of `size`, no grouping, exact.
    pub fn new(time: impl Into<String>, size: Span) -> Self {
        Self {
            time: time.into(),
            size,
            slide: None,
            offset: Span::Units(0),
            by: vec![],
            lateness: LatenessOpt::Exact,
            on_late: OnLate::Drop,
            null_time: NullTime::Error,
            threads: None,
            farm: FarmOptions::default(),
        }
    }

    /// Checks everything that can be checked without the data.
    pub fn validate(&self) -> Result<()> {
        self.validate_params()?;
        self.validate_by()
    }

    /// The checks of [`Self::validate`] but the grouping columns' (an operator with parameters of its own
    /// checks those in between, so that the first error reported stays the same).
    pub(crate) fn validate_params(&self) -> Result<()> {
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
        self.farm.validate()
    }

    /// The grouping columns are distinct.
    pub(crate) fn validate_by(&self) -> Result<()> {
        for (i, b) in self.by.iter().enumerate() {
            if self.by[..i].contains(b) {
                return Err(Error::param("by", format!("column '{b}' is listed twice")));
            }
        }
        Ok(())
    }

    /// Resolves the window and the lateness against the input's time column (whose type is `time_type`).
    pub fn resolve(&self, time_type: &DataType) -> Result<ResolvedWindow> {
        self.resolve_with(time_type, |unit| self.lateness.policy(unit, &self.time))
    }

    /// [`Self::resolve`] with the operator's own lateness policy (window aggregation merges sorted sources).
    pub(crate) fn resolve_with(
        &self,
        time_type: &DataType,
        lateness: impl FnOnce(TimeUnit) -> Result<Lateness>,
    ) -> Result<ResolvedWindow> {
        let unit = time_unit(time_type, &self.time)?;
        let size = self.size.resolve(unit, &self.time, "size")?;
        let slide = self
            .slide
            .as_ref()
            .map(|s| s.resolve(unit, &self.time, "slide"))
            .transpose()?;
        // Any offset, negative or beyond the slide, gives the windows `[j*slide + offset, ... + size)`;
        // `WindowSpec` reduces it modulo the slide (see `docs/time.md`).
        let offset = self.offset.resolve_signed(unit, &self.time, "offset")?;
        Ok(ResolvedWindow {
            spec: WindowSpec::new(size, slide, offset)?,
            lateness: lateness(unit)?,
            format: TimeFormat::of(time_type),
            window_type: if unit == TimeUnit::Plain {
                DataType::Int64
            } else {
                time_type.clone()
            },
        })
    }
}
