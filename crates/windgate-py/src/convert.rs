//! Python arguments to core options.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyInt, PyString};
use windgate_core::Error;
use windgate_core::aggregate::{Strategy, WindowAggregateOptions};
use windgate_core::order::admission::{NullTime, OnLate};
use windgate_core::order::kslack::LatenessOpt;
use windgate_core::runtime::farm::FarmStats;
use windgate_core::runtime::{PaneSchedulerKind, WindowSchedulerKind};
use windgate_core::time::Span;
use windgate_core::window_options::{FarmOptions, WindowOptions};

use crate::errors::to_py;

/// An int (an integer time column's units; 0 on any column) or a duration string: the Python wrapper turned
/// `timedelta`s into duration strings, and the core judges ints once it knows the time column's type.
pub fn span(obj: &Bound<'_, PyAny>, param: &str) -> PyResult<Span> {
    if obj.is_instance_of::<pyo3::types::PyBool>() {
        return Err(to_py(Error::param(
            param,
            "expected an int or a duration string, got a bool",
        )));
    }
    if obj.is_instance_of::<PyInt>() {
        return obj
            .extract::<i64>()
            .map(Span::Units)
            .map_err(|_| to_py(Error::param(param, "the integer does not fit in int64")));
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Span::Text(s.to_str()?.to_string()));
    }
    let tname = obj.get_type().name()?.to_string();
    Err(to_py(Error::new(
        windgate_core::ErrorKind::ColumnType,
        format!("{param}: expected an int or a duration string such as \"10s\", got {tname}"),
    )))
}

/// A number of rows (`rows=`, `rows_slide=`): a positive int (not a bool) up to
/// [`windgate_core::aggregate::MAX_ROWS`].
fn count(obj: &Bound<'_, PyAny>, param: &str) -> PyResult<u64> {
    let bad = || {
        to_py(Error::param(
            param,
            format!(
                "expected a positive int (rows) up to 2**48, got {}",
                obj.repr().map_or_else(|_| "?".into(), |r| r.to_string())
            ),
        ))
    };
    if obj.is_instance_of::<pyo3::types::PyBool>() || !obj.is_instance_of::<PyInt>() {
        return Err(bad());
    }
    match obj.extract::<i64>() {
        Ok(n) if n > 0 && (n as u64) <= windgate_core::aggregate::MAX_ROWS => Ok(n as u64),
        _ => Err(bad()),
    }
}

/// `lateness=`: `None`, a bound (int or duration string) or `"adaptive"`.
pub fn lateness_opt(lateness: Option<&Bound<'_, PyAny>>) -> PyResult<LatenessOpt> {
    Ok(match lateness.filter(|l| !l.is_none()) {
        None => LatenessOpt::Exact,
        Some(l) if l.extract::<String>().is_ok_and(|s| s == "adaptive") => LatenessOpt::Adaptive,
        Some(l) => LatenessOpt::Bound(span(l, "lateness")?),
    })
}

/// `threads=`: `None` (all cores) or a positive int.
pub fn threads_opt(threads: Option<i64>) -> PyResult<Option<usize>> {
    match threads {
        None => Ok(None),
        Some(t) if t >= 1 => Ok(Some(t as usize)),
        Some(t) => Err(to_py(Error::param(
            "threads",
            format!("expected a positive int or None, got {t}"),
        ))),
    }
}

/// Builds and validates the options shared by the batch function and the streaming class.
#[allow(clippy::too_many_arguments)]
pub fn options<'py>(
    py: Python<'py>,
    time: String,
    size: Option<&Bound<'py, PyAny>>,
    slide: Option<&Bound<'py, PyAny>>,
    offset: Option<&Bound<'py, PyAny>>,
    gap: Option<&Bound<'py, PyAny>>,
    rows: [Option<&Bound<'py, PyAny>>; 2],
    tz: Option<String>,
    by: Vec<String>,
    aggs: Vec<(String, Vec<String>)>,
    lateness: Option<&Bound<'_, PyAny>>,
    on_late: &str,
    null_time: &str,
    threads: Option<i64>,
    strategy: &str,
    farm: Option<&Bound<'_, PyDict>>,
    sources: usize,
) -> PyResult<WindowAggregateOptions> {
    let given = |o: Option<&Bound<'py, PyAny>>| o.filter(|v| !v.is_none()).is_some();
    let gap = gap
        .filter(|g| !g.is_none())
        .map(|g| span(g, "gap"))
        .transpose()?;
    if gap.is_some() && (given(size) || given(slide)) {
        return Err(to_py(Error::param(
            "gap",
            "session windows (gap=) take no size= or slide= (sliding windows): give either gap or size/slide",
        )));
    }
    let [rows, rows_slide] = rows.map(|r| r.filter(|v| !v.is_none()));
    let rows = rows.map(|r| count(r, "rows")).transpose()?;
    let rows_slide = rows_slide.map(|r| count(r, "rows_slide")).transpose()?;
    if rows.is_some() && (given(size) || given(slide) || gap.is_some()) {
        return Err(to_py(Error::param(
            "rows",
            "count windows (rows=) take no size=, slide= or gap=: give either rows or size/slide or gap",
        )));
    }
    // Session and count windows read no size: the window options carry a placeholder.
    let one = PyInt::new(py, 1).into_any();
    let size = match size.filter(|s| !s.is_none()) {
        Some(s) => s,
        None if gap.is_some() || rows.is_some() => &one,
        None => {
            return Err(to_py(Error::param(
                "size",
                "expected the window length (or gap= for session windows)",
            )));
        }
    };
    let w = WindowArgs {
        time,
        size,
        slide,
        offset,
        by,
        lateness,
        on_late,
        null_time,
        threads,
        farm,
    };
    let mut o = WindowAggregateOptions::from_window(w.options()?, aggs);
    o.strategy = Strategy::parse(strategy).map_err(to_py)?;
    o.sources = sources;
    o.gap = gap;
    (o.rows, o.rows_slide) = (rows, rows_slide);
    o.tz = tz;
    o.validate().map_err(to_py)?;
    Ok(o)
}

/// The window, lateness, grouping, threads and farm arguments every windowed operator takes.
pub struct WindowArgs<'a, 'py> {
    pub time: String,
    pub size: &'a Bound<'py, PyAny>,
    pub slide: Option<&'a Bound<'py, PyAny>>,
    pub offset: Option<&'a Bound<'py, PyAny>>,
    pub by: Vec<String>,
    pub lateness: Option<&'a Bound<'py, PyAny>>,
    pub on_late: &'a str,
    pub null_time: &'a str,
    pub threads: Option<i64>,
    pub farm: Option<&'a Bound<'py, PyDict>>,
}

impl WindowArgs<'_, '_> {
    /// The options they make, not yet validated.
    pub fn options(self) -> PyResult<WindowOptions> {
        let mut o = WindowOptions::new(self.time, span(self.size, "size")?);
        o.slide = self
            .slide
            .filter(|s| !s.is_none())
            .map(|s| span(s, "slide"))
            .transpose()?;
        if let Some(offset) = self.offset.filter(|o| !o.is_none()) {
            o.offset = span(offset, "offset")?;
        }
        o.by = self.by;
        o.lateness = lateness_opt(self.lateness)?;
        o.on_late = OnLate::parse(self.on_late).map_err(to_py)?;
        o.null_time = NullTime::parse(self.null_time).map_err(to_py)?;
        o.threads = threads_opt(self.threads)?;
        o.farm = farm_options(self.farm)?;
        Ok(o)
    }
}

/// The pane farm's knobs from a dict: `scheduler`, `window_scheduler`, `split_threshold`, `setpoint`,
/// `sample_interval` (seconds).
pub fn farm_options(farm: Option<&Bound<'_, PyDict>>) -> PyResult<FarmOptions> {
    let mut f = FarmOptions::default();
    let Some(d) = farm else {
        return Ok(f);
    };
    let bad =
        |key: &str, what: &str| to_py(Error::param("farm", format!("'{key}': expected {what}")));
    for (k, v) in d.iter() {
        let key: String = k
            .extract()
            .map_err(|_| to_py(Error::param("farm", "expected string keys")))?;
        match key.as_str() {
            "scheduler" => {
                let name: String = v.extract().map_err(|_| bad(&key, "a string"))?;
                f.scheduler = PaneSchedulerKind::parse(&name).map_err(to_py)?;
            }
            "window_scheduler" => {
                let name: String = v.extract().map_err(|_| bad(&key, "a string"))?;
                f.window_scheduler = WindowSchedulerKind::parse(&name).map_err(to_py)?;
            }
            "split_threshold" => {
                f.split_threshold = if v.is_none() {
                    None
                } else {
                    Some(
                        v.extract::<u64>()
                            .map_err(|_| bad(&key, "a positive int or None"))?,
                    )
                };
            }
            "setpoint" => f.setpoint = v.extract().map_err(|_| bad(&key, "a number"))?,
            "sample_interval" => {
                let secs: f64 = v.extract().map_err(|_| bad(&key, "seconds as a number"))?;
                if !(secs > 0.0 && secs.is_finite()) {
                    return Err(bad(&key, "a positive number of seconds"));
                }
                f.sample_interval = std::time::Duration::from_secs_f64(secs);
            }
            other => {
                return Err(to_py(Error::param(
                    "farm",
                    format!(
                        "unknown key {other:?}; expected scheduler, window_scheduler, split_threshold, \
                         setpoint or sample_interval"
                    ),
                )));
            }
        }
    }
    Ok(f)
}

/// A span (an int or a duration string, as [`span`] reads it) in a time unit (`"s"`, `"ms"`, `"us"`, `"ns"`,
/// `"day"`, `"plain"`), with the operators' rules ([`Span::resolve`]: a nonzero int on a timestamp column is
/// an error naming `column`; only `offset`, `lower` and `upper` may be negative durations): `windgate.spark`
/// uses it to place rows in time ranges with exactly the core's reading of durations.
#[pyfunction]
#[pyo3(signature = (value, unit, param="size", column="time"))]
pub fn duration_units(
    value: &Bound<'_, PyAny>,
    unit: &str,
    param: &str,
    column: &str,
) -> PyResult<i64> {
    use windgate_core::time::TimeUnit;
    let unit = match unit {
        "s" => TimeUnit::Second,
        "ms" => TimeUnit::Millisecond,
        "us" => TimeUnit::Microsecond,
        "ns" => TimeUnit::Nanosecond,
        "day" => TimeUnit::Day,
        "plain" => TimeUnit::Plain,
        other => {
            return Err(to_py(Error::param(
                "unit",
                format!("unknown time unit {other:?}"),
            )));
        }
    };
    let span = span(value, param)?;
    match param {
        "offset" | "lower" | "upper" => span.resolve_signed(unit, column, param),
        _ => span.resolve(unit, column, param),
    }
    .map_err(to_py)
}

/// An output schema for Python: a `pyarrow.Schema`, or `None` before it is known.
pub fn py_schema<'py>(
    py: Python<'py>,
    schema: Option<arrow_schema::SchemaRef>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    schema
        .map(|s| pyo3_arrow::PySchema::new(s).into_pyarrow(py))
        .transpose()
}

/// One batch from the outputs of several pushes (a stream pushed at once).
pub fn concat_batches(
    schema: Option<arrow_schema::SchemaRef>,
    outs: Vec<arrow_array::RecordBatch>,
) -> Result<arrow_array::RecordBatch, Error> {
    if outs.len() == 1 {
        return Ok(outs.into_iter().next().expect("one"));
    }
    let schema = schema.expect("bound before pushing");
    Ok(arrow_select::concat::concat_batches(&schema, &outs)?)
}

/// The pane farm's figures into a `stats` dict.
pub fn farm_stats(d: &Bound<'_, PyDict>, f: &FarmStats) -> PyResult<()> {
    let secs = |ns: &[u64]| ns.iter().map(|&n| n as f64 * 1e-9).collect::<Vec<f64>>();
    d.set_item("plq_busy_s", secs(&f.plq_busy_ns))?;
    d.set_item("wlq_busy_s", secs(&f.wlq_busy_ns))?;
    d.set_item("punctuations", f.punctuations)?;
    d.set_item("panes_closed", f.panes_closed)?;
    d.set_item("panes_split", f.panes_split)?;
    d.set_item("split_factor", f.split_factor)?;
    d.set_item("theta_b", f.theta_b)?;
    d.set_item("alpha", f.alpha)?;
    d.set_item("utilisation", f.utilisation)?;
    d.set_item("window_tasks", f.window_tasks)?;
    Ok(())
}
