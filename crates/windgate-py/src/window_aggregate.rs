//! `window_aggregate` and `WindowAggregator` for Python.

use arrow_array::RecordBatch;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use pyo3_arrow::input::AnyRecordBatch;
use pyo3_arrow::{PyRecordBatch, PyTable};
use windgate_core::Error;
use windgate_core::aggregate as core;

use crate::checkpoint::{Runtime, annotations, snapshot_bytes};
use crate::convert::{concat_batches, farm_stats, options, py_schema, span};
use crate::errors::{detached, detached_batch_call, finish_batch, to_py};

/// Batch window aggregation over one or several sources (see `windgate.window_aggregate`).
#[pyfunction]
#[pyo3(signature = (sources, *, time, size=None, slide=None, offset=None, gap=None, rows=None,
                    rows_slide=None, tz=None, by=vec![], aggs, lateness=None,
                    on_late="drop", null_time="error", threads=None, strategy="auto", farm=None,
                    order_by=None, in_memory=false, input="rows", output="windows", row_offset=0,
                    allowed_lateness=None, emit="final", interval=None))]
#[allow(clippy::too_many_arguments)]
pub fn window_aggregate<'py>(
    py: Python<'py>,
    sources: Vec<AnyRecordBatch>,
    time: String,
    size: Option<&Bound<'py, PyAny>>,
    slide: Option<&Bound<'py, PyAny>>,
    offset: Option<&Bound<'py, PyAny>>,
    gap: Option<&Bound<'py, PyAny>>,
    rows: Option<&Bound<'py, PyAny>>,
    rows_slide: Option<&Bound<'py, PyAny>>,
    tz: Option<String>,
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
    allowed_lateness: Option<&Bound<'py, PyAny>>,
    emit: &str,
    interval: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let mut opts = options(
        py,
        time,
        size,
        slide,
        offset,
        gap,
        [rows, rows_slide],
        tz,
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
    update_mode(&mut opts, allowed_lateness, emit, interval)?;
    opts.validate().map_err(to_py)?;
    let readers = sources
        .into_iter()
        .map(|s| s.into_reader())
        .collect::<PyResult<Vec<_>>>()?;
    // In-memory input (tables, record batches, data frames) is read whole up front: that costs nothing
    // and lets windows close as soon as they are exact; a stream is read once, batch by batch.
    let out = detached_batch_call(py, "window_aggregate", |check| {
        if opts.gap.is_some() || opts.rows.is_some() {
            let inputs = readers
                .into_iter()
                .map(|r| (r.schema(), r.map(|b| b.map_err(Error::from))))
                .collect();
            if opts.rows.is_some() {
                return core::count_window_aggregate(inputs, opts, check);
            }
            let (schema, batches) = core::session_aggregate(inputs, opts, check)?;
            return Ok(core::BatchOutput {
                schema,
                batches,
                late: None,
            });
        }
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
    let windows = PyTable::try_new(out.batches, out.schema)?.into_pyarrow(py)?;
    // `on_late="keep"`: the windows and the late rows (the Python wrapper names the pair).
    match out.late {
        Some(late) => {
            let late = PyTable::try_new(vec![late.clone()], late.schema())?.into_pyarrow(py)?;
            Ok((windows, late).into_pyobject(py)?.into_any())
        }
        None => Ok(windows),
    }
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

/// The update-mode keywords (`allowed_lateness`, `emit`, `interval`) into the options.
fn update_mode(
    opts: &mut core::WindowAggregateOptions,
    allowed_lateness: Option<&Bound<'_, PyAny>>,
    emit: &str,
    interval: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    opts.allowed_lateness = allowed_lateness
        .filter(|v| !v.is_none())
        .map(|v| span(v, "allowed_lateness"))
        .transpose()?;
    let interval = interval
        .filter(|v| !v.is_none())
        .map(|v| span(v, "interval"))
        .transpose()?;
    opts.emit = core::Emit::parse(emit, interval).map_err(to_py)?;
    Ok(())
}

/// The streaming operator (see `windgate.WindowAggregator`): sliding and tumbling windows, or session
/// windows (`gap=`), or count windows (`rows=`).
#[pyclass(module = "windgate._native")]
pub struct WindowAggregator {
    inner: Inner,
}

enum Inner {
    Window(Box<core::WindowAggregator>),
    Session(Box<core::SessionAggregator>),
    Count(Box<core::CountWindowAggregator>),
}

#[pymethods]
impl WindowAggregator {
    #[new]
    #[pyo3(signature = (*, time, size=None, slide=None, offset=None, gap=None, rows=None,
                    rows_slide=None, tz=None, by=vec![], aggs, lateness=None,
                        on_late="drop", null_time="error", threads=None, strategy="auto", farm=None,
                        sources=1, credits=Some(1 << 20), order_by=None, input="rows",
                        output="windows", row_offset=0, allowed_lateness=None, emit="final",
                        interval=None))]
    #[allow(clippy::too_many_arguments)]
    fn new<'py>(
        py: Python<'py>,
        time: String,
        size: Option<&Bound<'py, PyAny>>,
        slide: Option<&Bound<'py, PyAny>>,
        offset: Option<&Bound<'py, PyAny>>,
        gap: Option<&Bound<'py, PyAny>>,
        rows: Option<&Bound<'py, PyAny>>,
        rows_slide: Option<&Bound<'py, PyAny>>,
        tz: Option<String>,
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
        allowed_lateness: Option<&Bound<'py, PyAny>>,
        emit: &str,
        interval: Option<&Bound<'py, PyAny>>,
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
            py,
            time,
            size,
            slide,
            offset,
            gap,
            [rows, rows_slide],
            tz,
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
        update_mode(&mut opts, allowed_lateness, emit, interval)?;
        opts.validate().map_err(to_py)?;
        let inner = if opts.rows.is_some() {
            Inner::Count(Box::new(
                core::CountWindowAggregator::new(opts).map_err(to_py)?,
            ))
        } else if opts.gap.is_some() {
            Inner::Session(Box::new(core::SessionAggregator::new(opts).map_err(to_py)?))
        } else {
            Inner::Window(Box::new(core::WindowAggregator::new(opts).map_err(to_py)?))
        };
        Ok(Self { inner })
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
        let out = detached(py, "push", || match inner {
            Inner::Window(inner) => {
                inner.bind(&schema)?;
                let outs =
                    inner.push_stream(reader.map(|b| b.map_err(Error::from)), source as usize)?;
                concat_batches(inner.output_schema(), outs)
            }
            Inner::Session(inner) => {
                inner.bind(&schema)?;
                let outs = reader
                    .map(|b| inner.push(&b?, source as usize))
                    .collect::<Result<Vec<_>, Error>>()?;
                concat_batches(inner.output_schema(), outs)
            }
            Inner::Count(inner) => {
                inner.bind(&schema)?;
                let outs = reader
                    .map(|b| inner.push(&b?, source as usize))
                    .collect::<Result<Vec<_>, Error>>()?;
                concat_batches(inner.output_schema(), outs)
            }
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
        let out = detached(py, "close_source", || match inner {
            Inner::Window(inner) => inner.close_source(source as usize),
            Inner::Session(inner) => inner.close_source(source as usize),
            Inner::Count(inner) => inner.close_source(source as usize),
        });
        self.finish(py, out)
    }

    /// End of stream: returns the rows of every window still open.
    fn flush<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let inner = &mut self.inner;
        let out = detached(py, "flush", || match inner {
            Inner::Window(inner) => inner.flush(),
            Inner::Session(inner) => inner.flush(),
            Inner::Count(inner) => inner.flush(),
        });
        self.finish(py, out)
    }

    /// `on_late="keep"`: the late rows since the last call (see `windgate.WindowAggregator.late_rows`).
    fn late_rows<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let out = match &mut self.inner {
            Inner::Window(w) if w.options().on_late == core::OnLate::Keep => {
                detached(py, "late_rows", || w.take_late_rows())
            }
            Inner::Count(c) if c.options().on_late == core::OnLate::Keep => {
                detached(py, "late_rows", || c.take_late_rows())
            }
            _ => {
                return Err(to_py(Error::param(
                    "on_late",
                    "late rows are kept only with on_late=\"keep\" (this operator drops or refuses them)",
                )));
            }
        }
        .map_err(to_py)?;
        match out {
            Some(b) => PyRecordBatch::new(b).into_pyarrow(py),
            None => Ok(py.None().into_bound(py)),
        }
    }

    /// Counters: rows in, late rows, windows and rows out, open panes, keys, watermark, ...
    #[getter]
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = match &self.inner {
            Inner::Window(inner) => inner.stats(),
            Inner::Session(inner) => inner.stats(),
            Inner::Count(inner) => inner.stats(),
        };
        let d = PyDict::new(py);
        d.set_item("batches_in", s.batches_in)?;
        d.set_item("rows_in", s.rows_in)?;
        d.set_item("pending_rows", s.pending_rows)?;
        d.set_item("backpressured", s.backpressured)?;
        d.set_item("late_rows", s.late_rows)?;
        d.set_item("late_rows_pending", s.late_rows_pending)?;
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
        match &self.inner {
            Inner::Session(inner) => d.set_item("next_close", inner.next_close())?,
            Inner::Count(inner) => d.set_item("next_close", inner.next_close())?,
            _ => {}
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
        match &mut self.inner {
            Inner::Window(inner) => snapshot_bytes(py, || inner.snapshot(&annotations(note))),
            Inner::Session(inner) => snapshot_bytes(py, || inner.snapshot(&annotations(note))),
            Inner::Count(inner) => snapshot_bytes(py, || inner.snapshot(&annotations(note))),
        }
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
            // A snapshot of session or count windows names its own operator in the header.
            let operator = windgate_core::snapshot::describe(data)?.0;
            let sessions = operator == core::SESSION_OPERATOR;
            let counts = operator == core::COUNT_WINDOW_OPERATOR;
            let mut opts = if sessions {
                core::SessionAggregator::snapshot_options(data)?
            } else if counts {
                core::CountWindowAggregator::snapshot_options(data)?
            } else {
                core::WindowAggregator::snapshot_options(data)?
            };
            if let Some(s) = runtime.apply(&mut opts.threads, &mut opts.farm) {
                opts.strategy = core::Strategy::parse(&s)?;
            }
            opts.validate()?;
            Ok(if sessions {
                Inner::Session(Box::new(core::SessionAggregator::restore(
                    data,
                    Some(opts),
                )?))
            } else if counts {
                Inner::Count(Box::new(core::CountWindowAggregator::restore(
                    data,
                    Some(opts),
                )?))
            } else {
                Inner::Window(Box::new(core::WindowAggregator::restore(data, Some(opts))?))
            })
        })
        .map_err(to_py)?;
        Ok(Self { inner })
    }

    /// The output schema (known after the first batch), as a pyarrow.Schema, or None.
    #[getter]
    fn schema<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let schema = match &self.inner {
            Inner::Window(inner) => inner.output_schema(),
            Inner::Session(inner) => inner.output_schema(),
            Inner::Count(inner) => inner.output_schema(),
        };
        py_schema(py, schema)
    }
}

impl WindowAggregator {
    fn finish<'py>(
        &mut self,
        py: Python<'py>,
        out: Result<RecordBatch, Error>,
    ) -> PyResult<Bound<'py, PyAny>> {
        finish_batch(py, out, |why| match &mut self.inner {
            Inner::Window(inner) => inner.poison(why),
            Inner::Session(inner) => inner.poison(why),
            Inner::Count(inner) => inner.poison(why),
        })
    }
}
