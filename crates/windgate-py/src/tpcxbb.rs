//! The TPCx-BB-like generator and queries for Python (see `windgate.tpcxbb`).

use pyo3::prelude::*;
use pyo3::types::PyList;
use pyo3_arrow::PyTable;
use windgate_core::tpcxbb::{self as core, GenOptions, Query};

use crate::errors::{detached_batch_call, to_py};
use crate::pipeline::from_value;

/// `(clickstream, store_sales)` as pyarrow Tables (`docs/tpcxbb.md` §2).
#[pyfunction]
#[pyo3(signature = (rows, seed=0, *, days=28, users=None, items=5000, stores=20))]
pub fn tpcxbb_generate<'py>(
    py: Python<'py>,
    rows: u64,
    seed: u64,
    days: i64,
    users: Option<i64>,
    items: i64,
    stores: i64,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    let opts = GenOptions {
        rows: rows as usize,
        seed,
        days,
        users,
        items,
        stores,
    };
    let (clicks, sales) = detached_batch_call(py, "tpcxbb.generate", |_| core::generate(&opts))?;
    let clicks = PyTable::try_new(clicks, core::clickstream_schema())?.into_pyarrow(py)?;
    let sales = PyTable::try_new(sales, core::store_sales_schema())?.into_pyarrow(py)?;
    Ok((clicks, sales))
}

/// A query's operators in spec form, `[(kind, params), ...]`, and the table it reads.
#[pyfunction]
pub fn tpcxbb_query<'py>(
    py: Python<'py>,
    name: &str,
) -> PyResult<(Bound<'py, PyList>, &'static str)> {
    let q = Query::parse(name).map_err(to_py)?;
    let ops = PyList::empty(py);
    for (kind, params) in q.spec() {
        ops.append((kind, from_value(py, &params)?))?;
    }
    Ok((ops, q.table().name()))
}
