//! `band_join` and `BandJoiner` for Python.

use arrow_array::RecordBatch;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use pyo3_arrow::input::AnyRecordBatch;
use pyo3_arrow::{PyRecordBatch, PyTable};
use windgate_core::Error;
use windgate_core::join::{
    self as core, BandJoinOptions, JoinHow, JoinStrategy, Predicate, Semantics, Side,
};
use windgate_core::order::admission::OnLate;
use windgate_core::time::Span;

use crate::checkpoint::{annotations, given, snapshot_bytes};
use crate::convert::{lateness_opt, py_schema, span, threads_opt};
use crate::errors::{detached, detached_batch_call, to_py};

/// A predicate as the Python wrapper sends it: `("band", left, right, eps)` or `("eq", left, right, None)`.
type PyPredicate = (String, String, String, Option<f64>);

/// The time bounds as the Python wrapper sends them: `window`, or `lower` and `upper` (validated in core).
type PyBounds<'a, 'py> = (
    Option<&'a Bound<'py, PyAny>>,
    Option<&'a Bound<'py, PyAny>>,
    Option<&'a Bound<'py, PyAny>>,
);

fn opt_span(v: Option<&Bound<'_, PyAny>>, param: &str) -> PyResult<Option<Span>> {
    v.filter(|v| !v.is_none())
        .map(|v| span(v, param))
        .transpose()
}

#[allow(clippy::too_many_arguments)]
fn options(
    time: (String, String),
    (window, lower, upper): PyBounds<'_, '_>,
    how: &str,
    on: Vec<PyPredicate>,
    threads: Option<i64>,
    lateness: Option<&Bound<'_, PyAny>>,
    on_late: &str,
    semantics: &str,
    index: bool,
    strategy: &str,
    credits: Option<i64>,
) -> PyResult<BandJoinOptions> {
    let on = on
        .into_iter()
        .map(|(kind, left, right, eps)| match (kind.as_str(), eps) {
            ("band", Some(eps)) => Ok(Predicate::Band { left, right, eps }),
            ("eq", _) => Ok(Predicate::Eq { left, right }),
            _ => Err(to_py(Error::param(
                "on",
                format!("expected windgate.band(...) or windgate.eq(...), got {kind:?}"),
            ))),
        })
        .collect::<PyResult<Vec<_>>>()?;
    let mut o = BandJoinOptions::new(time, Span::Units(0), on);
    o.window = opt_span(window, "window")?;
    o.lower = opt_span(lower, "lower")?;
    o.upper = opt_span(upper, "upper")?;
    o.how = JoinHow::parse(how).map_err(to_py)?;
    o.threads = threads_opt(threads)?;
    o.lateness = lateness_opt(lateness)?;
    o.on_late = OnLate::parse(on_late).map_err(to_py)?;
    o.semantics = Semantics::parse(semantics).map_err(to_py)?;
    o.index = index;
    o.strategy = JoinStrategy::parse(strategy).map_err(to_py)?;
    o.credits = credits_opt(credits)?;
    o.validate().map_err(to_py)?;
    Ok(o)
}

fn credits_opt(credits: Option<i64>) -> PyResult<Option<u64>> {
    match credits {
        None => Ok(None),
        Some(c) if c >= 1 => Ok(Some(c as u64)),
        Some(c) => Err(to_py(Error::param(
            "credits",
            format!("expected at least 1 row (or None: unbounded), got {c}"),
        ))),
    }
}

/// A snapshot's options with the runtime settings a restore was given, each converted as `new` does.
fn with_overrides(
    mut o: BandJoinOptions,
    overrides: Option<&Bound<'_, PyDict>>,
) -> PyResult<BandJoinOptions> {
    if let Some(v) = given(overrides, "threads")? {
        o.threads = threads_opt(v.extract()?)?;
    }
    if let Some(v) = given(overrides, "strategy")? {
        o.strategy = JoinStrategy::parse(&v.extract::<String>()?).map_err(to_py)?;
    }
    if let Some(v) = given(overrides, "index")? {
        o.index = v.extract()?;
    }
    if let Some(v) = given(overrides, "credits")? {
        o.credits = credits_opt(v.extract()?)?;
    }
    o.validate().map_err(to_py)?;
    Ok(o)
}

/// Batch band join (see `windgate.band_join`).
#[pyfunction]
#[pyo3(signature = (left, right, *, time, window=None, on=vec![], threads=None, lateness=None,
                    on_late="drop", semantics="interval", index=true, strategy="auto", lower=None,
                    upper=None, how="inner"))]
#[allow(clippy::too_many_arguments)]
pub fn band_join<'py>(
    py: Python<'py>,
    left: AnyRecordBatch,
    right: AnyRecordBatch,
    time: (String, String),
    window: Option<&Bound<'py, PyAny>>,
    on: Vec<PyPredicate>,
    threads: Option<i64>,
    lateness: Option<&Bound<'py, PyAny>>,
    on_late: &str,
    semantics: &str,
    index: bool,
    strategy: &str,
    lower: Option<&Bound<'py, PyAny>>,
    upper: Option<&Bound<'py, PyAny>>,
    how: &str,
) -> PyResult<Bound<'py, PyAny>> {
    // The batch function is never refused: credits do not apply.
    let opts = options(
        time,
        (window, lower, upper),
        how,
        on,
        threads,
        lateness,
        on_late,
        semantics,
        index,
        strategy,
        None,
    )?;
    let (left, right) = (left.into_reader()?, right.into_reader()?);
    let (schema, batches) = detached_batch_call(py, "band_join", |check| {
        let l = (left.schema(), left.map(|b| b.map_err(Error::from)));
        let r = (right.schema(), right.map(|b| b.map_err(Error::from)));
        core::band_join(l, r, opts, check)
    })?;
    PyTable::try_new(batches, schema)?.into_pyarrow(py)
}

/// The streaming band join (see `windgate.BandJoiner`).
#[pyclass(module = "windgate._native")]
pub struct BandJoiner {
    inner: core::BandJoiner,
}

#[pymethods]
impl BandJoiner {
    #[new]
    #[pyo3(signature = (*, time, window=None, on=vec![], threads=None, lateness=None, on_late="drop",
                        semantics="interval", index=true, strategy="auto", credits=Some(1 << 20),
                        lower=None, upper=None, how="inner"))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        time: (String, String),
        window: Option<&Bound<'_, PyAny>>,
        on: Vec<PyPredicate>,
        threads: Option<i64>,
        lateness: Option<&Bound<'_, PyAny>>,
        on_late: &str,
        semantics: &str,
        index: bool,
        strategy: &str,
        credits: Option<i64>,
        lower: Option<&Bound<'_, PyAny>>,
        upper: Option<&Bound<'_, PyAny>>,
        how: &str,
    ) -> PyResult<Self> {
        let opts = options(
            time,
            (window, lower, upper),
            how,
            on,
            threads,
            lateness,
            on_late,
            semantics,
            index,
            strategy,
            credits,
        )?;
        Ok(Self {
            inner: core::BandJoiner::new(opts).map_err(to_py)?,
        })
    }

    /// Pushes one batch (or every batch of a stream, as one batch: all or nothing) of `side`; returns the
    /// pairs that became final.
    #[pyo3(signature = (batch, side="left"))]
    fn push<'py>(
        &mut self,
        py: Python<'py>,
        batch: AnyRecordBatch,
        side: &str,
    ) -> PyResult<Bound<'py, PyAny>> {
        let side = Side::parse(side).map_err(to_py)?;
        let reader = batch.into_reader()?;
        let schema = reader.schema();
        let inner = &mut self.inner;
        let out = detached(py, "push", || {
            // Read the whole stream first: a failing stream or a refused push then consumes nothing.
            let batches = reader
                .map(|b| b.map_err(Error::from))
                .collect::<Result<Vec<_>, _>>()?;
            inner.push_all(&schema, batches, side)
        });
        finish(py, out)
    }

    /// End of both inputs: every remaining pair.
    fn flush<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let inner = &mut self.inner;
        let out = detached(py, "flush", || inner.flush());
        finish(py, out)
    }

    /// Counters: rows in per side, late rows, pairs out, comparisons (total and per thread), ...
    #[getter]
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.inner.stats();
        let d = PyDict::new(py);
        d.set_item("rows_in_left", s.rows_in[0])?;
        d.set_item("rows_in_right", s.rows_in[1])?;
        d.set_item("late_rows_left", s.late_rows[0])?;
        d.set_item("late_rows_right", s.late_rows[1])?;
        d.set_item("late_rows", s.late_rows[0] + s.late_rows[1])?;
        d.set_item("pairs_out", s.pairs_out)?;
        d.set_item("unmatched_rows", s.unmatched_rows)?;
        d.set_item("comparisons", s.comparisons)?;
        let per: Vec<u64> = s.per_thread.iter().map(|p| p.0).collect();
        let pairs: Vec<u64> = s.per_thread.iter().map(|p| p.1).collect();
        d.set_item("comparisons_per_thread", per)?;
        d.set_item("pairs_per_thread", pairs)?;
        d.set_item("buffered_rows", s.buffered_rows)?;
        d.set_item("pending_rows_left", s.pending_rows[0])?;
        d.set_item("pending_rows_right", s.pending_rows[1])?;
        d.set_item("pending_rows", s.pending_rows[0] + s.pending_rows[1])?;
        d.set_item("retained_rows_left", s.retained_rows[0])?;
        d.set_item("retained_rows_right", s.retained_rows[1])?;
        d.set_item("retained_rows", s.retained_rows[0] + s.retained_rows[1])?;
        d.set_item("window_rows", s.window_rows)?;
        d.set_item("backpressured", s.backpressured)?;
        d.set_item("watermark_left", s.watermark[0])?;
        d.set_item("watermark_right", s.watermark[1])?;
        let [left, right] = s.watermark_text;
        d.set_item("watermark_time_left", left)?;
        d.set_item("watermark_time_right", right)?;
        d.set_item("threads", s.threads)?;
        d.set_item("strategy", s.strategy)?;
        d.set_item("semantics", s.semantics)?;
        d.set_item("index", s.index)?;
        Ok(d)
    }

    /// The joiner's whole state as checkpoint bytes; `note` (the Python class's keyword arguments) is
    /// carried along.
    #[pyo3(signature = (note=None))]
    fn snapshot<'py>(
        &mut self,
        py: Python<'py>,
        note: Option<String>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let annotations = annotations(note);
        let inner = &mut self.inner;
        snapshot_bytes(py, || inner.snapshot(&annotations))
    }

    /// A joiner continuing from a snapshot; `overrides` holds runtime settings only (`threads`,
    /// `strategy`, `index`, `credits`).
    #[staticmethod]
    #[pyo3(signature = (data, overrides=None))]
    fn restore(
        py: Python<'_>,
        data: &[u8],
        overrides: Option<Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let opts = core::BandJoiner::snapshot_options(data).map_err(to_py)?;
        let opts = with_overrides(opts, overrides.as_ref())?;
        let data = data.to_vec();
        let inner = detached(py, "restore", || {
            core::BandJoiner::restore(&data, Some(opts))
        })
        .map_err(to_py)?;
        Ok(Self { inner })
    }

    /// The output schema (known once both sides pushed a batch), as a pyarrow.Schema, or None.
    #[getter]
    fn schema<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        py_schema(py, self.inner.output_schema())
    }
}

fn finish<'py>(py: Python<'py>, out: Result<RecordBatch, Error>) -> PyResult<Bound<'py, PyAny>> {
    PyRecordBatch::new(out.map_err(to_py)?).into_pyarrow(py)
}
