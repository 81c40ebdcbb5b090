//! Core errors and panics as Python exceptions of the classes in `windgate.errors`.

use std::cell::RefCell;

use arrow_array::RecordBatch;
use pyo3::prelude::*;
use pyo3::types::PyType;
use windgate_core::threads::panic_message;
use windgate_core::{Error, ErrorKind, interrupt};

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
        // An internal error leaves the operator unusable, like a panic (`catch_panic`): the README's Errors
        // section promises `OperatorPoisonedError` for both.
        ErrorKind::Internal => "OperatorPoisonedError",
        ErrorKind::Backpressure => "BackpressureError",
        ErrorKind::Interrupted => "WindgateError",
        ErrorKind::Snapshot => "SnapshotError",
        ErrorKind::SnapshotMismatch => "SnapshotMismatchError",
    }
}

thread_local! {
    /// The exception a signal handler raised inside [`interrupt::scope`] (KeyboardInterrupt for Ctrl-C),
    /// kept until the GIL-free call returns and raised as itself.
    static PENDING_SIGNAL: RefCell<Option<PyErr>> = const { RefCell::new(None) };
}

/// The interrupt hook of every GIL-free call: takes the GIL for a moment and runs Python's signal handlers.
fn check_signals() -> Result<(), Error> {
    Python::attach(|py| py.check_signals()).map_err(|e| {
        PENDING_SIGNAL.with(|p| *p.borrow_mut() = Some(e));
        interrupt::interrupted("a signal handler raised")
    })
}

/// Runs `f` without the GIL, with Ctrl-C checked by the core's kernels (see `windgate_core::interrupt`) and a
/// panic turned into an error.
pub fn detached<T: Send>(
    py: Python<'_>,
    what: &str,
    f: impl FnOnce() -> Result<T, Error> + Send,
) -> Result<T, Error> {
    py.detach(|| interrupt::scope(check_signals, || catch_panic(what, f)))
}

/// The Python exception for a core error; an interruption is raised as the signal handler's own exception.
pub fn to_py(err: Error) -> PyErr {
    if err.kind() == ErrorKind::Interrupted {
        return PENDING_SIGNAL
            .with(|p| p.borrow_mut().take())
            .unwrap_or_else(|| {
                pyo3::exceptions::PyKeyboardInterrupt::new_err(err.message().to_string())
            });
    }
    // A Python generator behind an Arrow stream that was interrupted: the stream reports the exception as
    // text only. Ctrl-C must stay a KeyboardInterrupt (never an InputError that `except ValueError` eats).
    if err.kind() == ErrorKind::Input && err.message().contains("KeyboardInterrupt") {
        return pyo3::exceptions::PyKeyboardInterrupt::new_err(err.message().to_string());
    }
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
            let msg = panic_message(&payload);
            Err(Error::new(
                ErrorKind::Poisoned,
                format!(
                    "{what}: internal error ({msg}); the operator is unusable, please report this"
                ),
            ))
        }
    }
}

/// Runs a batch call without the GIL: `f` gets a callback that checks for Ctrl-C (call it between batches;
/// kernels also check on their own); a KeyboardInterrupt is carried out of the GIL-free section and raised as
/// itself, and a panic becomes an exception.
pub fn detached_batch_call<T: Send>(
    py: Python<'_>,
    what: &str,
    f: impl FnOnce(&mut dyn FnMut() -> Result<(), Error>) -> Result<T, Error> + Send,
) -> PyResult<T> {
    detached(py, what, || f(&mut check_signals)).map_err(to_py)
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
            if matches!(e.kind(), ErrorKind::Poisoned | ErrorKind::Internal) {
                poison(e.message());
            }
            Err(to_py(e))
        }
    }
}
