//! Core errors and panics as Python exceptions of the classes in `windgate.errors`.

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
        ErrorKind::Poisoned => "OperatorPoisonedError",
        ErrorKind::Input => "InputError",
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
