//! `preference` (skyline, top-δ dominant, top-k over windows) and `PreferenceQuery` for Python.

use arrow_array::RecordBatch;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use pyo3_arrow::PyTable;
use pyo3_arrow::input::AnyRecordBatch;
use windgate_core::Error;
use windgate_core::preference::{
    PreferenceOperator, PreferenceOptions, PreferenceStrategy, QueryKind,
};

use crate::checkpoint::{Runtime, annotations, snapshot_bytes};
use crate::convert::{WindowArgs, concat_batches, farm_stats, py_schema};
use crate::errors::{detached, detached_batch_call, finish_batch, to_py};

/// The query's own arguments.
struct QueryArgs<'a> {
    query: &'a str,
    dims: Vec<String>,
    prefer: Vec<String>,
    delta: Option<i64>,
    score: Option<String>,
    k: Option<i64>,
    descending: bool,
}

impl QueryArgs<'_> {
    fn kind(self) -> PyResult<QueryKind> {
        let count = |v: Option<i64>, param: &str| -> PyResult<usize> {
            match v {
                Some(n) if n >= 0 => Ok(n as usize),
                Some(n) => Err(param_err(param, format!("expected an int >= 0, got {n}"))),
                None => Err(param_err(
                    param,
                    format!("{param} is required for query={:?}", self.query),
                )),
            }
        };
        let prefer = || QueryKind::parse_prefer(&self.prefer, self.dims.len()).map_err(to_py);
        Ok(match self.query {
            "skyline" => QueryKind::Skyline {
                prefer: prefer()?,
                dims: self.dims.clone(),
            },
            "top_dominant" => QueryKind::TopDominant {
                prefer: prefer()?,
                delta: count(self.delta, "delta")?,
                dims: self.dims.clone(),
            },
            "topk" => QueryKind::TopK {
                score: self.score.clone().ok_or_else(|| {
                    param_err("score", "score is required for query=\"topk\"".into())
                })?,
                k: count(self.k, "k")?,
                descending: self.descending,
            },
            other => {
                return Err(param_err(
                    "query",
                    format!(
                        "unknown query {other:?}; expected \"skyline\", \"top_dominant\" or \"topk\""
                    ),
                ));
            }
        })
    }
}

fn param_err(param: &str, message: String) -> PyErr {
    to_py(Error::param(param, message))
}

fn options(w: WindowArgs<'_, '_>, q: QueryArgs<'_>, strategy: &str) -> PyResult<PreferenceOptions> {
    let opts = PreferenceOptions {
        window: w.options()?,
        query: q.kind()?,
        strategy: PreferenceStrategy::parse(strategy).map_err(to_py)?,
    };
    opts.validate().map_err(to_py)?;
    Ok(opts)
}

/// Batch skyline / top-δ dominant / top-k over windows (see `windgate.skyline` and friends).
#[pyfunction]
#[pyo3(signature = (data, *, query, time, size, slide=None, offset=None, by=vec![], dims=vec![],
                    prefer=vec!["min".to_string()], delta=None, score=None, k=None, descending=true,
                    lateness=None, on_late="drop", null_time="error", threads=None, strategy="auto",
                    farm=None))]
#[allow(clippy::too_many_arguments)]
pub fn preference<'py>(
    py: Python<'py>,
    data: AnyRecordBatch,
    query: &str,
    time: String,
    size: &Bound<'py, PyAny>,
    slide: Option<&Bound<'py, PyAny>>,
    offset: Option<&Bound<'py, PyAny>>,
    by: Vec<String>,
    dims: Vec<String>,
    prefer: Vec<String>,
    delta: Option<i64>,
    score: Option<String>,
    k: Option<i64>,
    descending: bool,
    lateness: Option<&Bound<'py, PyAny>>,
    on_late: &str,
    null_time: &str,
    threads: Option<i64>,
    strategy: &str,
    farm: Option<Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyAny>> {
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
        farm: farm.as_ref(),
    };
    let q = QueryArgs {
        query,
        dims,
        prefer,
        delta,
        score,
        k,
        descending,
    };
    let opts = options(w, q, strategy)?;
    let reader = data.into_reader()?;
    let (schema, batches) = detached_batch_call(py, query, |check| {
        let schema = reader.schema();
        let batches = reader.map(|b| b.map_err(Error::from));
        windgate_core::preference::preference(schema, batches, opts, check)
    })?;
    PyTable::try_new(batches, schema)?.into_pyarrow(py)
}

/// The streaming operator (see `windgate.SkylineQuery` and friends).
#[pyclass(module = "windgate._native")]
pub struct PreferenceQuery {
    inner: PreferenceOperator,
}

#[pymethods]
impl PreferenceQuery {
    #[new]
    #[pyo3(signature = (*, query, time, size, slide=None, offset=None, by=vec![], dims=vec![],
                        prefer=vec!["min".to_string()], delta=None, score=None, k=None, descending=true,
                        lateness=None, on_late="drop", null_time="error", threads=None, strategy="auto",
                        farm=None))]
    #[allow(clippy::too_many_arguments)]
    fn new<'py>(
        query: &str,
        time: String,
        size: &Bound<'py, PyAny>,
        slide: Option<&Bound<'py, PyAny>>,
        offset: Option<&Bound<'py, PyAny>>,
        by: Vec<String>,
        dims: Vec<String>,
        prefer: Vec<String>,
        delta: Option<i64>,
        score: Option<String>,
        k: Option<i64>,
        descending: bool,
        lateness: Option<&Bound<'py, PyAny>>,
        on_late: &str,
        null_time: &str,
        threads: Option<i64>,
        strategy: &str,
        farm: Option<Bound<'py, PyDict>>,
    ) -> PyResult<Self> {
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
            farm: farm.as_ref(),
        };
        let q = QueryArgs {
            query,
            dims,
            prefer,
            delta,
            score,
            k,
            descending,
        };
        Ok(Self {
            inner: PreferenceOperator::new(options(w, q, strategy)?).map_err(to_py)?,
        })
    }

    /// Pushes one batch (or every batch of a stream); returns the rows of windows that became final.
    fn push<'py>(&mut self, py: Python<'py>, batch: AnyRecordBatch) -> PyResult<Bound<'py, PyAny>> {
        let reader = batch.into_reader()?;
        let schema = reader.schema();
        let inner = &mut self.inner;
        let out = detached(py, "push", || {
            inner.bind(&schema)?;
            let mut outs = vec![];
            for b in reader {
                outs.push(inner.push(&b.map_err(Error::from)?)?);
            }
            concat_batches(inner.output_schema(), outs)
        });
        self.finish(py, out)
    }

    /// End of stream: returns the rows of every window still open.
    fn flush<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let inner = &mut self.inner;
        let out = detached(py, "flush", || inner.flush());
        self.finish(py, out)
    }

    /// Counters: rows in, late rows, windows and rows out, retained rows, watermark, farm figures, ...
    #[getter]
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.inner.stats();
        let d = PyDict::new(py);
        d.set_item("batches_in", s.batches_in)?;
        d.set_item("rows_in", s.rows_in)?;
        d.set_item("late_rows", s.late_rows)?;
        d.set_item("null_time_rows", s.null_time_rows)?;
        d.set_item("rows_out", s.rows_out)?;
        d.set_item("windows_out", s.windows_out)?;
        d.set_item("retained_rows", s.retained_rows)?;
        d.set_item("keys", s.keys)?;
        d.set_item("watermark", s.watermark)?;
        d.set_item("watermark_time", s.watermark_text)?;
        d.set_item("slack", s.slack)?;
        d.set_item("threads", s.threads)?;
        d.set_item("strategy", s.strategy)?;
        if let Some(f) = s.farm {
            farm_stats(&d, &f)?;
        }
        Ok(d)
    }

    /// The output schema (known after the first batch), as a pyarrow.Schema, or None.
    #[getter]
    fn schema<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        py_schema(py, self.inner.output_schema())
    }

    /// The operator's whole state as snapshot bytes; `note` (the Python class's keyword arguments) is
    /// carried along.
    #[pyo3(signature = (note=None))]
    fn snapshot<'py>(
        &mut self,
        py: Python<'py>,
        note: Option<String>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let notes = annotations(note);
        let inner = &mut self.inner;
        snapshot_bytes(py, || inner.snapshot(&notes))
    }

    /// An operator continuing from a snapshot, with the runtime settings in `overrides` (`threads`,
    /// `strategy`, `farm`, converted as the constructor converts them) instead of the snapshot's.
    #[staticmethod]
    #[pyo3(signature = (data, overrides=None))]
    fn restore(
        py: Python<'_>,
        data: &[u8],
        overrides: Option<Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let runtime = Runtime::read(overrides.as_ref())?;
        let inner = detached(py, "restore", || {
            let mut opts = PreferenceOperator::snapshot_options(data)?;
            if let Some(s) = runtime.apply(&mut opts.window.threads, &mut opts.window.farm) {
                opts.strategy = PreferenceStrategy::parse(&s)?;
            }
            opts.validate()?;
            PreferenceOperator::restore(data, Some(opts))
        })
        .map_err(to_py)?;
        Ok(Self { inner })
    }
}

impl PreferenceQuery {
    fn finish<'py>(
        &mut self,
        py: Python<'py>,
        out: Result<RecordBatch, Error>,
    ) -> PyResult<Bound<'py, PyAny>> {
        finish_batch(py, out, |why| self.inner.poison(why))
    }
}
