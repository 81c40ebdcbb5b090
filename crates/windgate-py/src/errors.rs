//! Core errors and panics as Python exceptions of the classes in `windgate.errors`.

use std::sync::Mutex;

use arrow_array::RecordBatch;
use pyo3::prelude::*;
use pyo3::types::PyType;
use windgate_core::{Error, ErrorKind};

fn class_name(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::InvalidParameter => "InvalidParameterError",
        ErrorKind::ColumnNotFound => "ColumnNotFoundError",
        ErrorKind::ColumnType => "ColumnTypeError",
        ErrorKind::SchemaMismatch => "SchemaMismatchError",
        ErrorKind::LateRow => "LateRowError",
        ErrorKind::Overflow => "WindgateOverflowError",
        ErrorKind::NullValue => "NullTimeError",
        ErrorKind::InvalidValue => "InvalidValueError",
        ErrorKind::Poisoned => "OperatorPoisonedError",
        ErrorKind::Input => "InputError",
        ErrorKind::Backpressure => "BackpressureError",
    }
}

/// The Python exception for a core error.
pub fn to_py(err: Error) -> PyErr {
    Python::attach(|py| match exception_class(py, class_name(err.kind())) {
        Ok(cls) => PyErr::from_type(cls, err.message().to_string()),
        Err(e) => e,
    })
}

fn exception_class<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyType>> {
    Ok(py
        .import("windgate.errors")?
        .getattr(name)?
        .cast_into::<PyType>()?)
}

/// Runs `f`, turning a Rust panic into a Python exception instead of aborting the interpreter.
pub fn catch_panic<T>(what: &str, f: impl FnOnce() -> Result<T, Error>) -> Result<T, Error> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => {
            let msg = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            Err(Error::new(
                ErrorKind::Poisoned,
                format!(
                    "{what}: internal error ({msg}); the operator is unusable, please report this"
                ),
            ))
        }
    }
}

/// Runs a batch call without the GIL: `f` gets a callback that checks for Ctrl-C (call it between batches);
/// a KeyboardInterrupt is carried out of the GIL-free section and raised, and a panic becomes an exception.
pub fn detached_batch_call<T: Send>(
    py: Python<'_>,
    what: &str,
    f: impl FnOnce(&mut dyn FnMut() -> Result<(), Error>) -> Result<T, Error> + Send,
) -> PyResult<T> {
    let interrupt: Mutex<Option<PyErr>> = Mutex::new(None);
    let result = py.detach(|| {
        catch_panic(what, || {
            f(&mut || {
                Python::attach(|py| py.check_signals()).map_err(|e| {
                    *interrupt.lock().expect("not poisoned") = Some(e);
                    Error::new(ErrorKind::Poisoned, "interrupted")
                })
            })
        })
    });
    if let Some(e) = interrupt.into_inner().expect("not poisoned") {
        return Err(e);
    }
    result.map_err(to_py)
}

/// A streaming call's result for Python: the batch, or the error (after poisoning the operator when the error
/// says it is no longer usable).
pub fn finish_batch<'py>(
    py: Python<'py>,
    out: Result<RecordBatch, Error>,
    poison: impl FnOnce(&str),
) -> PyResult<Bound<'py, PyAny>> {
    match out {
        Ok(batch) => pyo3_arrow::PyRecordBatch::new(batch).into_pyarrow(py),
        Err(e) => {
            if e.kind() == ErrorKind::Poisoned {
                poison(e.message());
            }
            Err(to_py(e))
        }
    }
}
