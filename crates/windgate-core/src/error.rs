//! The one error type of the core: a kind, a message and the underlying cause. Every message names the
//! parameter, column or source at fault, because it is what a Python user sees (`docs/architecture.md`,
//! "Contracts": errors). The bindings map each [`ErrorKind`] to a class of `windgate.errors`.

use std::fmt;
use std::sync::Arc;

/// What kind of mistake an [`Error`] reports; the bindings pick the Python exception class (all in
/// `windgate.errors`) from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// A parameter has a bad value (`size=0`, `slide > size`, unknown strategy...). Python: `InvalidParameterError`.
    InvalidParameter,
    /// A named column is not in the input. Python: `ColumnNotFoundError`.
    ColumnNotFound,
    /// A column or parameter has the wrong type. Python: `ColumnTypeError` (a `TypeError`).
    ColumnType,
    /// Batches or sources disagree on a column's type. Python: `SchemaMismatchError`.
    SchemaMismatch,
    /// A late row under `on_late="error"`, or an unsorted source. Python: `LateRowError`.
    LateRow,
    /// Timestamps whose windows leave the i64 range, or an i64 sum that overflows. Python:
    /// `WindgateOverflowError`.
    Overflow,
    /// A null where none is allowed (the time column). Python: `NullTimeError`.
    NullValue,
    /// A value the operation cannot take: NaN or null in a preference dimension or score. Python:
    /// `InvalidValueError`.
    InvalidValue,
    /// The operator failed earlier and refuses further work, or a worker thread panicked. Python:
    /// `OperatorPoisonedError`.
    Poisoned,
    /// The input could not be read or converted (an Arrow stream that failed, data Arrow cannot convert).
    /// Python: `InputError`.
    Input,
    /// windgate failed while building its own output (a result column or batch): not the caller's input,
    /// so never `Input`. The operator's state is then unknown, so it refuses further work, as after a
    /// panic. Python: `OperatorPoisonedError`.
    Internal,
    /// A source ran too far ahead of the others (its credits are used up); the batch was not consumed and
    /// the operator is still usable: push the lagging sources or close them, then retry. Python:
    /// `BackpressureError`.
    Backpressure,
    /// The caller asked the work to stop (Ctrl-C, through [`crate::interrupt`]). Python: the original
    /// `KeyboardInterrupt` (or whatever exception the signal handler raised), never a windgate class.
    Interrupted,
    /// Bytes given to restore are not a whole windgate snapshot (truncated, changed, another format), or
    /// were written by a newer windgate. Python: `SnapshotError`.
    Snapshot,
    /// A whole snapshot that does not fit the restoring operator: another operator, or other query
    /// parameters. Python: `SnapshotMismatchError` (a `SnapshotError`).
    SnapshotMismatch,
}

/// The cause of an [`Error`], shared so that errors stay cheap to clone (a failed run hands one error to
/// every thread that asks).
type Cause = Arc<dyn std::error::Error + Send + Sync + 'static>;

/// A windgate error: a kind, a message that names what was wrong and what was expected, and the error that
/// caused it, if any ([`std::error::Error::source`]).
#[derive(Debug, Clone)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    source: Option<Cause>,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            source: None,
        }
    }

    /// The same error with `cause` as its [`std::error::Error::source`].
    pub fn with_source(mut self, cause: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Arc::new(cause));
        self
    }

    /// `param`: what was wrong; the message starts with the parameter's name.
    pub fn param(param: &str, message: impl fmt::Display) -> Self {
        Self::new(ErrorKind::InvalidParameter, format!("{param}: {message}"))
    }

    pub fn column_not_found(param: &str, column: &str, available: &[String]) -> Self {
        Self::new(
            ErrorKind::ColumnNotFound,
            format!(
                "{param}: column '{column}' is not in the input (columns: {})",
                available.join(", ")
            ),
        )
    }

    pub fn column_type(column: &str, message: impl fmt::Display) -> Self {
        Self::new(
            ErrorKind::ColumnType,
            format!("column '{column}': {message}"),
        )
    }

    /// An Arrow failure while windgate builds its own output (`RecordBatch::try_new`, a concatenation, an
    /// output cast): [`ErrorKind::Internal`], since the caller's input was already accepted, with the Arrow
    /// error as its source. Use it as `.map_err(Error::output)?` where `?` would otherwise call the
    /// `From<ArrowError>` conversion, which labels the failure bad input.
    pub fn output(e: arrow_schema::ArrowError) -> Self {
        Self::new(
            ErrorKind::Internal,
            format!("building the output failed: {e}"),
        )
        .with_source(e)
    }

    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    pub fn message(&self) -> &str {
        &self.message
    }
}

/// Two errors are equal when they say the same: same kind and message. The cause is not compared (it is
/// already spelled out in the message, and `dyn Error` has no equality).
impl PartialEq for Error {
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind && self.message == other.message
    }
}

impl Eq for Error {}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

impl From<arrow_schema::ArrowError> for Error {
    /// An Arrow failure while reading or converting the caller's input (a failing stream, a column Arrow
    /// cannot cast): [`ErrorKind::Input`], with the Arrow error as its source. Code that builds output uses
    /// [`Error::output`] instead.
    fn from(e: arrow_schema::ArrowError) -> Self {
        Self::new(
            ErrorKind::Input,
            format!("data: reading or converting Arrow data failed: {e}"),
        )
        .with_source(e)
    }
}

/// Whether a streaming operator still takes calls: not after `flush` (end of stream), nor after an error in a
/// step that changes engine state (the state is then unknown, so the operator refuses further work).
#[derive(Debug, Clone, Default)]
pub struct Lifecycle {
    flushed: bool,
    poisoned: Option<String>,
}

impl Lifecycle {
    /// Fails unless the operator is usable; `what` names the call.
    pub fn check(&self, what: &str) -> Result<()> {
        if let Some(why) = &self.poisoned {
            return Err(Error::new(
                ErrorKind::Poisoned,
                format!("{what}: the operator failed earlier ({why})"),
            ));
        }
        if self.flushed {
            return Err(Error::param(
                what,
                "the operator was flushed (end of stream); create a new one",
            ));
        }
        Ok(())
    }

    /// Passes a state-changing step's result through, poisoning the operator on error.
    pub fn record<T>(&mut self, r: Result<T>) -> Result<T> {
        if let Err(e) = &r {
            self.poison(e.message());
        }
        r
    }

    /// Marks the operator unusable. The first cause is kept: later failures (including the "failed earlier"
    /// refusals themselves) never wrap it again, so messages do not nest.
    pub fn poison(&mut self, why: impl Into<String>) {
        if self.poisoned.is_none() {
            self.poisoned = Some(why.into());
        }
    }

    /// Whether an error left the operator unusable.
    pub fn is_poisoned(&self) -> bool {
        self.poisoned.is_some()
    }

    /// End of stream: later calls fail.
    pub fn end(&mut self) {
        self.flushed = true;
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use arrow_schema::ArrowError;

    use super::*;

    #[test]
    fn an_arrow_failure_keeps_its_cause() {
        let input = Error::from(ArrowError::CastError("no cast".into()));
        assert_eq!(input.kind(), ErrorKind::Input);
        let cause = input.source().expect("a source");
        assert!(matches!(
            cause.downcast_ref::<ArrowError>(),
            Some(ArrowError::CastError(m)) if m == "no cast"
        ));
        assert!(input.message().contains("no cast"), "{input}");

        let output = Error::output(ArrowError::InvalidArgumentError("lengths differ".into()));
        assert_eq!(output.kind(), ErrorKind::Internal);
        assert!(output.message().starts_with("building the output failed"));
        assert!(
            output
                .source()
                .unwrap()
                .downcast_ref::<ArrowError>()
                .is_some()
        );
        // Clones share the cause.
        assert!(output.clone().source().is_some());
    }

    #[test]
    fn plain_errors_have_no_cause_and_compare_by_kind_and_message() {
        let e = Error::param("size", "expected a positive window size");
        assert!(e.source().is_none());
        let caused = e.clone().with_source(ArrowError::MemoryError("x".into()));
        assert_eq!(e, caused);
        assert_ne!(e, Error::new(ErrorKind::Input, e.message()));
    }
}
