//! The one error type of the core. Every variant names the parameter, column or source at fault, because the
//! message is what a Python user sees (DESIGN §7). The bindings map each [`ErrorKind`] to a Python class.

use std::fmt;

/// What kind of mistake an [`Error`] reports; the bindings pick the Python exception class from it.
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
    /// Timestamps or sums leave the i64 range. Python: `TimeOverflowError` / `AggregateOverflowError`.
    Overflow,
    /// A null where none is allowed (the time column). Python: `NullTimeError`.
    NullValue,
    /// A value the operation cannot take: NaN or null in a preference dimension or score. Python:
    /// `InvalidValueError`.
    InvalidValue,
    /// The operator failed earlier and refuses further work. Python: `OperatorPoisonedError`.
    Poisoned,
    /// The input could not be read (an Arrow stream that failed). Python: `InputError`.
    Input,
    /// A source ran too far ahead of the others (its credits are used up); the batch was not consumed and
    /// the operator is still usable: push the lagging sources or close them, then retry. Python:
    /// `BackpressureError`.
    Backpressure,
    /// The caller asked the work to stop (Ctrl-C, through [`crate::interrupt`]). Python: the original
    /// `KeyboardInterrupt` (or whatever exception the signal handler raised), never a windgate class.
    Interrupted,
}

/// A windgate error: a kind and a message that names what was wrong and what was expected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    message: String,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
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

    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

impl From<arrow_schema::ArrowError> for Error {
    /// Arrow errors come from reading the caller's input (a failing stream) or, in principle, from building
    /// output arrays; surface them rather than panic.
    fn from(e: arrow_schema::ArrowError) -> Self {
        Self::new(
            ErrorKind::Input,
            format!("data: reading or converting Arrow data failed: {e}"),
        )
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
