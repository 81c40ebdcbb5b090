//! Ordered pipelines of the built-in columnar operators for Python (see `windgate.Pipeline`): the operators
//! arrive in spec form (`(kind, params dict)`), converted here to `windgate_core::columnar::Value` and
//! checked by the core.

use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use pyo3_arrow::input::AnyRecordBatch;
use pyo3_arrow::{PySchema, PyTable};
use windgate_core::columnar::{
    ColumnarPipeline, DEFAULT_CHUNK_ROWS, MAX_SPEC_NESTING, RunMode, Value,
};
use windgate_core::runtime::pipeline::{
    Partitioning, PipelineOptions, PipelineStats, ReorderScheme, SchedulerPolicy,
};
use windgate_core::{Error, ErrorKind};

use crate::convert::threads_opt;
use crate::errors::{detached_batch_call, to_py};

/// A list, tuple or dict being converted: its children still to convert and the values converted so far.
struct Open<'py> {
    /// The dict's keys, in order (`None` for a list or tuple).
    keys: Option<Vec<String>>,
    children: std::vec::IntoIter<Bound<'py, PyAny>>,
    done: Vec<Value>,
    param: String,
}

impl Open<'_> {
    /// The label of the next child: `param["key"]` inside a dict, `param` inside a list.
    fn child_param(&self) -> String {
        match &self.keys {
            Some(keys) => format!("{}[{:?}]", self.param, keys[self.done.len()]),
            None => self.param.clone(),
        }
    }

    fn close(self) -> Value {
        match self.keys {
            Some(keys) => Value::Map(keys.into_iter().zip(self.done).collect()),
            None => Value::List(self.done),
        }
    }
}

/// A scalar as its value, or a container opened for its children.
fn open<'py>(obj: &Bound<'py, PyAny>, param: &str) -> PyResult<Result<Value, Open<'py>>> {
    if obj.is_none() {
        return Ok(Ok(Value::Null));
    }
    if obj.is_instance_of::<PyBool>() {
        return Ok(Ok(Value::Bool(obj.extract()?)));
    }
    if obj.is_instance_of::<PyInt>() {
        return obj
            .extract::<i64>()
            .map(|i| Ok(Value::Int(i)))
            .map_err(|_| to_py(Error::param(param, "an integer does not fit in int64")));
    }
    if obj.is_instance_of::<PyFloat>() {
        return Ok(Ok(Value::Float(obj.extract()?)));
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Ok(Value::Str(s.to_str()?.to_string())));
    }
    if let Ok(d) = obj.cast::<PyDict>() {
        let (mut keys, mut children) = (Vec::with_capacity(d.len()), Vec::with_capacity(d.len()));
        for (k, v) in d.iter() {
            let key: String = k
                .extract()
                .map_err(|_| to_py(Error::param(param, "dict keys must be strings")))?;
            keys.push(key);
            children.push(v);
        }
        return Ok(Err(Open {
            done: Vec::with_capacity(keys.len()),
            keys: Some(keys),
            children: children.into_iter(),
            param: param.to_string(),
        }));
    }
    if obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>() {
        let children = obj.try_iter()?.collect::<PyResult<Vec<_>>>()?;
        return Ok(Err(Open {
            keys: None,
            done: Vec::with_capacity(children.len()),
            children: children.into_iter(),
            param: param.to_string(),
        }));
    }
    let tname = obj.get_type().name()?.to_string();
    Err(to_py(Error::new(
        ErrorKind::ColumnType,
        format!("{param}: expected None, a bool, number, string, list, tuple or dict, got {tname}"),
    )))
}

/// A Python value (None, bool, int, float, str, list, tuple, dict with str keys) in spec form.
///
/// Converted with a heap stack, not by recursion, so that a deeply nested value (a chain of 100 000 `&`
/// nests that deep) cannot overflow the thread's stack; nesting deeper than `MAX_SPEC_NESTING` (which a
/// self-referential list would) is an error naming `param`.
pub fn to_value(obj: &Bound<'_, PyAny>, param: &str) -> PyResult<Value> {
    let mut stack = match open(obj, param)? {
        Ok(v) => return Ok(v),
        Err(o) => vec![o],
    };
    loop {
        let top = stack.last_mut().expect("an open container");
        match top.children.next() {
            Some(child) => {
                let p = top.child_param();
                match open(&child, &p)? {
                    Ok(v) => top.done.push(v),
                    Err(_) if stack.len() >= MAX_SPEC_NESTING => {
                        return Err(to_py(Error::param(
                            param,
                            format!(
                                "the value nests more than {MAX_SPEC_NESTING} lists, tuples or dicts deep \
                                 (a list containing itself?); at most {MAX_SPEC_NESTING}"
                            ),
                        )));
                    }
                    Err(o) => stack.push(o),
                }
            }
            None => {
                let v = stack.pop().expect("an open container").close();
                match stack.last_mut() {
                    Some(parent) => parent.done.push(v),
                    None => return Ok(v),
                }
            }
        }
    }
}

/// A spec value back to Python (lists as tuples, so that predicates read as written).
pub fn from_value<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Int(i) => i.into_pyobject(py)?.into_any(),
        Value::Float(f) => f.into_pyobject(py)?.into_any(),
        Value::Str(s) => PyString::new(py, s).into_any(),
        Value::List(items) => PyTuple::new(
            py,
            items
                .iter()
                .map(|i| from_value(py, i))
                .collect::<PyResult<Vec<_>>>()?,
        )?
        .into_any(),
        Value::Map(entries) => {
            let d = PyDict::new(py);
            for (k, v) in entries {
                d.set_item(k, from_value(py, v)?)?;
            }
            d.into_any()
        }
    })
}

fn build(ops: &[(String, Bound<'_, PyAny>)]) -> PyResult<ColumnarPipeline> {
    let mut p = ColumnarPipeline::new();
    for (kind, params) in ops {
        let v = to_value(params, kind)?;
        p = p.push(kind, &v).map_err(to_py)?;
    }
    Ok(p)
}

fn positive(v: Option<i64>, param: &str) -> PyResult<Option<usize>> {
    match v {
        None => Ok(None),
        Some(n) if n >= 1 => Ok(Some(n as usize)),
        Some(n) => Err(to_py(Error::param(
            param,
            format!("expected a positive int, got {n}"),
        ))),
    }
}

fn seconds(v: Option<f64>, param: &str) -> PyResult<Option<Duration>> {
    match v {
        None => Ok(None),
        Some(s) if s > 0.0 && s.is_finite() && s < 1e6 => Ok(Some(Duration::from_secs_f64(s))),
        Some(s) => Err(to_py(Error::param(
            param,
            format!("expected a positive number of seconds, got {s}"),
        ))),
    }
}

/// Output schema of a pipeline for an input schema (checks every operator).
#[pyfunction]
pub fn pipeline_schema<'py>(
    py: Python<'py>,
    ops: Vec<(String, Bound<'py, PyAny>)>,
    schema: PySchema,
) -> PyResult<Bound<'py, PyAny>> {
    let out = build(&ops)?
        .output_schema(&schema.into_inner())
        .map_err(to_py)?;
    PySchema::new(out).into_pyarrow(py)
}

/// Runs a pipeline over `data`; returns `(table, stats)`.
#[pyfunction]
#[pyo3(signature = (data, ops, *, threads=None, scheduler="ct", reorder="nonblocking", partitioning="hybrid",
                    sequential=false, reorder_slots=None, time_slice=None, ct_window=None, qst_capacity=None,
                    marker_every=None, max_pending=None, chunk_rows=None))]
#[allow(clippy::too_many_arguments)]
pub fn run_pipeline<'py>(
    py: Python<'py>,
    data: AnyRecordBatch,
    ops: Vec<(String, Bound<'py, PyAny>)>,
    threads: Option<i64>,
    scheduler: &str,
    reorder: &str,
    partitioning: &str,
    sequential: bool,
    reorder_slots: Option<i64>,
    time_slice: Option<f64>,
    ct_window: Option<f64>,
    qst_capacity: Option<i64>,
    marker_every: Option<i64>,
    max_pending: Option<i64>,
    chunk_rows: Option<i64>,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyDict>)> {
    let pipeline = build(&ops)?;
    let mut o = PipelineOptions::default();
    if let Some(t) = threads_opt(threads)? {
        o.threads = t;
    }
    o.scheduler = SchedulerPolicy::parse(scheduler).map_err(to_py)?;
    o.reorder = ReorderScheme::parse(reorder).map_err(to_py)?;
    o.partitioning = Partitioning::parse(partitioning).map_err(to_py)?;
    if let Some(s) = positive(reorder_slots, "reorder_slots")? {
        o.reorder_slots = s;
    }
    if let Some(d) = seconds(time_slice, "time_slice")? {
        o.time_slice = d;
    }
    if let Some(d) = seconds(ct_window, "ct_window")? {
        o.ct_window = d;
    }
    if let Some(c) = positive(qst_capacity, "qst_capacity")? {
        o.qst_capacity = c;
    }
    match marker_every {
        Some(m) if m < 0 => {
            return Err(to_py(Error::param(
                "marker_every",
                format!("expected 0 (no markers) or a positive int, got {m}"),
            )));
        }
        Some(m) => o.marker_every = m as u64,
        None => {}
    }
    if let Some(m) = positive(max_pending, "max_pending")? {
        o.max_pending = m;
    }
    o.validate().map_err(to_py)?;
    let chunk_rows = positive(chunk_rows, "chunk_rows")?.unwrap_or(DEFAULT_CHUNK_ROWS);
    let mode = if sequential {
        RunMode::Sequential
    } else {
        RunMode::Parallel(o)
    };
    let reader = data.into_reader()?;
    let schema = reader.schema();
    let out = detached_batch_call(py, "Pipeline.run", |check| {
        let input = reader.map(|b| b.map_err(Error::from));
        pipeline.run_with(schema, input, &mode, chunk_rows, check)
    })?;
    let stats = stats_dict(py, &out.stats, out.rows_in, out.rows_out)?;
    let table = PyTable::try_new(out.batches, out.schema)?.into_pyarrow(py)?;
    Ok((table, stats))
}

fn stats_dict<'py>(
    py: Python<'py>,
    s: &PipelineStats,
    rows_in: u64,
    rows_out: u64,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("executor", s.executor)?;
    d.set_item("threads", s.threads)?;
    d.set_item("scheduler", s.scheduler)?;
    d.set_item("reorder", s.reorder)?;
    d.set_item("partitioning", s.partitioning)?;
    d.set_item("rows_in", rows_in)?;
    d.set_item("rows_out", rows_out)?;
    d.set_item("chunks_in", s.inputs)?;
    d.set_item("chunks_out", s.outputs)?;
    d.set_item("elapsed_s", s.elapsed.as_secs_f64())?;
    d.set_item(
        "rows_per_s",
        rows_in as f64 / s.elapsed.as_secs_f64().max(1e-9),
    )?;
    d.set_item("markers", s.latencies.len())?;
    d.set_item("latency_s", s.trimmed_latency().map(|l| l.as_secs_f64()))?;
    let ops = PyList::empty(py);
    for o in &s.ops {
        let od = PyDict::new(py);
        od.set_item("name", &o.name)?;
        od.set_item("kind", o.kind.label())?;
        if let windgate_core::runtime::pipeline::OpKind::Partitioned { partitions } = o.kind {
            od.set_item("partitions", partitions)?;
        }
        od.set_item("inputs", o.inputs)?;
        od.set_item("outputs", o.outputs)?;
        od.set_item("busy_s", o.busy.as_secs_f64())?;
        od.set_item("allotments", o.allotments)?;
        od.set_item("max_workers", o.max_workers)?;
        od.set_item("refused", o.refused)?;
        od.set_item("cost_s", o.cost().map(|c| c.as_secs_f64()))?;
        od.set_item("selectivity", o.selectivity())?;
        ops.append(od)?;
    }
    d.set_item("ops", ops)?;
    Ok(d)
}
