//! `window_aggregate` and `WindowAggregator` for Python.

use arrow_array::RecordBatch;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use pyo3_arrow::PyTable;
use pyo3_arrow::input::AnyRecordBatch;
use windgate_core::Error;
use windgate_core::aggregate as core;

use crate::checkpoint::{Runtime, annotations, snapshot_bytes};
use crate::convert::{concat_batches, farm_stats, options, py_schema};
use crate::errors::{detached, detached_batch_call, finish_batch, to_py};

/// Batch window aggregation over one or several sources (see `windgate.window_aggregate`).
#[pyfunction]
#[pyo3(signature = (sources, *, time, size, slide=None, offset=None, by=vec![], aggs, lateness=None,
                    on_late="drop", null_time="error", threads=None, strategy="auto", farm=None,
                    order_by=None, in_memory=false, input="rows", output="windows", row_offset=0))]
#[allow(clippy::too_many_arguments)]
pub fn window_aggregate<'py>(
    py: Python<'py>,
    sources: Vec<AnyRecordBatch>,
    time: String,
    size: &Bound<'py, PyAny>,
    slide: Option<&Bound<'py, PyAny>>,
    offset: Option<&Bound<'py, PyAny>>,
    by: Vec<String>,
    aggs: Vec<(String, Vec<String>)>,
    lateness: Option<&Bound<'py, PyAny>>,
    on_late: &str,
    null_time: &str,
    threads: Option<i64>,
    strategy: &str,
    farm: Option<Bound<'py, PyDict>>,
    order_by: Option<String>,
    in_memory: bool,
    input: &str,
    output: &str,
    row_offset: i64,
) -> PyResult<Bound<'py, PyAny>> {
    let mut opts = options(
        time,
        size,
        slide,
        offset,
        by,
        aggs,
        lateness,
        on_late,
        null_time,
        threads,
        strategy,
        farm.as_ref(),
        sources.len(),
    )?;
    opts.order_by = order_by;
    two_phase(&mut opts, input, output, row_offset)?;
    opts.validate().map_err(to_py)?;
    let readers = sources
        .into_iter()
        .map(|s| s.into_reader())
        .collect::<PyResult<Vec<_>>>()?;
    // In-memory input (tables, record batches, data frames) is read whole up front: that costs nothing
    // and lets windows close as soon as they are exact; a stream is read once, batch by batch.
    let (schema, batches) = detached_batch_call(py, "window_aggregate", |check| {
        if in_memory {
            let inputs = readers
                .into_iter()
                .map(|r| {
                    let schema = r.schema();
                    Ok((schema, r.collect::<Result<Vec<_>, _>>()?))
                })
                .collect::<Result<Vec<_>, Error>>()?;
            return core::window_aggregate_in_memory(inputs, opts, check);
        }
        let inputs = readers
            .into_iter()
            .map(|r| (r.schema(), r.map(|b| b.map_err(Error::from))))
            .collect();
        core::window_aggregate(inputs, opts, check)
    })?;
    PyTable::try_new(batches, schema)?.into_pyarrow(py)
}

/// The partial-state keywords (`input`, `output`, `row_offset`) into the options.
fn two_phase(
    opts: &mut core::WindowAggregateOptions,
    input: &str,
    output: &str,
    row_offset: i64,
) -> PyResult<()> {
    opts.input = core::InputKind::parse(input).map_err(to_py)?;
    opts.output = core::OutputKind::parse(output).map_err(to_py)?;
    opts.row_offset = u64::try_from(row_offset).map_err(|_| {
        to_py(Error::param(
            "row_offset",
            format!("expected an arrival number >= 0, got {row_offset}"),
        ))
    })?;
    Ok(())
}

/// The streaming operator (see `windgate.WindowAggregator`).
#[pyclass(module = "windgate._native")]
pub struct WindowAggregator {
    inner: core::WindowAggregator,
}

#[pymethods]
impl WindowAggregator {
    #[new]
    #[pyo3(signature = (*, time, size, slide=None, offset=None, by=vec![], aggs, lateness=None,
                        on_late="drop", null_time="error", threads=None, strategy="auto", farm=None,
                        sources=1, credits=Some(1 << 20), order_by=None, input="rows",
                        output="windows", row_offset=0))]
    #[allow(clippy::too_many_arguments)]
    fn new<'py>(
        time: String,
        size: &Bound<'py, PyAny>,
        slide: Option<&Bound<'py, PyAny>>,
        offset: Option<&Bound<'py, PyAny>>,
        by: Vec<String>,
        aggs: Vec<(String, Vec<String>)>,
        lateness: Option<&Bound<'py, PyAny>>,
        on_late: &str,
        null_time: &str,
        threads: Option<i64>,
        strategy: &str,
        farm: Option<Bound<'py, PyDict>>,
        sources: i64,
        credits: Option<i64>,
        order_by: Option<String>,
        input: &str,
        output: &str,
        row_offset: i64,
    ) -> PyResult<Self> {
        if sources < 1 {
            return Err(to_py(Error::param(
                "sources",
                format!("expected at least 1 source, got {sources}"),
            )));
        }
        if credits.is_some_and(|c| c < 1) {
            return Err(to_py(Error::param(
                "credits",
                format!("expected at least 1 row, or None for unbounded; got {credits:?}"),
            )));
        }
        let mut opts = options(
            time,
            size,
            slide,
            offset,
            by,
            aggs,
            lateness,
            on_late,
            null_time,
            threads,
            strategy,
            farm.as_ref(),
            sources as usize,
        )?;
        opts.credits = credits.map(|c| c as u64);
        opts.order_by = order_by;
        two_phase(&mut opts, input, output, row_offset)?;
        opts.validate().map_err(to_py)?;
        Ok(Self {
            inner: core::WindowAggregator::new(opts).map_err(to_py)?,
        })
    }

    /// Pushes one batch (or every batch of a stream) of `source`; returns the rows of windows that closed.
    #[pyo3(signature = (batch, source=0))]
    fn push<'py>(
        &mut self,
        py: Python<'py>,
        batch: AnyRecordBatch,
        source: i64,
    ) -> PyResult<Bound<'py, PyAny>> {
        if source < 0 {
            return Err(to_py(Error::param(
                "source",
                format!("expected a source index >= 0, got {source}"),
            )));
        }
        let reader = batch.into_reader()?;
        let schema = reader.schema();
        let inner = &mut self.inner;
        let out = detached(py, "push", || {
            inner.bind(&schema)?;
            let outs =
                inner.push_stream(reader.map(|b| b.map_err(Error::from)), source as usize)?;
            concat_batches(inner.output_schema(), outs)
        });
        self.finish(py, out)
    }

    /// Ends one source: it stops holding back the watermark. Returns the rows of windows that closed.
    fn close_source<'py>(&mut self, py: Python<'py>, source: i64) -> PyResult<Bound<'py, PyAny>> {
        if source < 0 {
            return Err(to_py(Error::param(
                "source",
                format!("expected a source index >= 0, got {source}"),
            )));
        }
        let inner = &mut self.inner;
        let out = detached(py, "close_source", || inner.close_source(source as usize));
        self.finish(py, out)
    }

    /// End of stream: returns the rows of every window still open.
    fn flush<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let inner = &mut self.inner;
        let out = detached(py, "flush", || inner.flush());
        self.finish(py, out)
    }

    /// Counters: rows in, late rows, windows and rows out, open panes, keys, watermark, ...
    #[getter]
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.inner.stats();
        let d = PyDict::new(py);
        d.set_item("batches_in", s.batches_in)?;
        d.set_item("rows_in", s.rows_in)?;
        d.set_item("pending_rows", s.pending_rows)?;
        d.set_item("backpressured", s.backpressured)?;
        d.set_item("late_rows", s.late_rows)?;
        d.set_item("null_time_rows", s.null_time_rows)?;
        d.set_item("rows_out", s.rows_out)?;
        d.set_item("windows_out", s.windows_out)?;
        d.set_item("open_panes", s.open_panes)?;
        d.set_item("open_slots", s.open_slots)?;
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

    /// The whole state as bytes (`windgate.WindowAggregator.snapshot`); `note` is carried in the header.
    #[pyo3(signature = (note=None))]
    fn snapshot<'py>(
        &mut self,
        py: Python<'py>,
        note: Option<String>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let inner = &mut self.inner;
        snapshot_bytes(py, || inner.snapshot(&annotations(note)))
    }

    /// An operator continuing from a snapshot, with the runtime settings in `overrides` changed.
    #[staticmethod]
    #[pyo3(signature = (data, overrides=None))]
    fn restore(
        py: Python<'_>,
        data: &[u8],
        overrides: Option<Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let runtime = Runtime::read(overrides.as_ref())?;
        let inner = detached(py, "restore", || {
            let mut opts = core::WindowAggregator::snapshot_options(data)?;
            if let Some(s) = runtime.apply(&mut opts.threads, &mut opts.farm) {
                opts.strategy = core::Strategy::parse(&s)?;
            }
            opts.validate()?;
            core::WindowAggregator::restore(data, Some(opts))
        })
        .map_err(to_py)?;
        Ok(Self { inner })
    }

    /// The output schema (known after the first batch), as a pyarrow.Schema, or None.
    #[getter]
    fn schema<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        py_schema(py, self.inner.output_schema())
    }
}

impl WindowAggregator {
    fn finish<'py>(
        &mut self,
        py: Python<'py>,
        out: Result<RecordBatch, Error>,
    ) -> PyResult<Bound<'py, PyAny>> {
        finish_batch(py, out, |why| self.inner.poison(why))
    }
}
