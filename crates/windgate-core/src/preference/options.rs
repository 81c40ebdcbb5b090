//! Options of the preference operators: the window, lateness, grouping and farm parameters every windowed
//! operator takes ([`WindowOptions`]), plus the query and the engine.

use crate::error::{Error, Result};
use crate::time::Span;
use crate::window_options::WindowOptions;

use super::Prefer;
pub use super::strategy::PreferenceStrategy;

/// Which preference query, with its parameters. Serialized flat, as the Python keywords are: `query` holds
/// the name ([`QueryKind::name`]), the parameters sit beside it (a checkpoint's parameters, where a mismatch
/// names the keyword).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "query", rename_all = "snake_case")]
pub enum QueryKind {
    /// The skyline over `dims` (all rows no other row dominates).
    Skyline {
        dims: Vec<String>,
        prefer: Vec<Prefer>,
    },
    /// The `delta` skyline rows of lowest κ (the top-δ dominant query of Mencagli et al., *Parallel Continuous
    /// Preference Queries over Out-of-Order and Bursty Data Streams*).
    TopDominant {
        dims: Vec<String>,
        prefer: Vec<Prefer>,
        delta: usize,
    },
    /// The `k` rows of best `score` (highest when `descending`).
    #[serde(rename = "topk")]
    TopK {
        score: String,
        k: usize,
        descending: bool,
    },
}

impl QueryKind {
    pub fn name(&self) -> &'static str {
        match self {
            Self::Skyline { .. } => "skyline",
            Self::TopDominant { .. } => "top_dominant",
            Self::TopK { .. } => "topk",
        }
    }

    /// The columns the kernels read, one `f64` column each (the dimensions, or the score).
    pub fn value_columns(&self) -> Vec<&str> {
        match self {
            Self::Skyline { dims, .. } | Self::TopDominant { dims, .. } => {
                dims.iter().map(String::as_str).collect()
            }
            Self::TopK { score, .. } => vec![score.as_str()],
        }
    }

    /// The parameter naming the value columns (for error messages).
    pub fn value_param(&self) -> &'static str {
        match self {
            Self::TopK { .. } => "score",
            _ => "dims",
        }
    }

    /// Parses `prefer`: one name for every dimension, or one per dimension.
    pub fn parse_prefer(prefer: &[String], dims: usize) -> Result<Vec<Prefer>> {
        let parse = |name: &String| {
            Prefer::parse(name).ok_or_else(|| {
                Error::param(
                    "prefer",
                    format!("unknown preference {name:?}; expected \"min\" or \"max\""),
                )
            })
        };
        match prefer.len() {
            1 => Ok(vec![parse(&prefer[0])?; dims]),
            n if n == dims => prefer.iter().map(parse).collect(),
            n => Err(Error::param(
                "prefer",
                format!("expected one preference or one per dimension ({dims}), got {n}"),
            )),
        }
    }

    fn validate(&self) -> Result<()> {
        let cols = self.value_columns();
        if let Self::Skyline { dims, prefer } | Self::TopDominant { dims, prefer, .. } = self {
            if dims.is_empty() {
                return Err(Error::param(
                    "dims",
                    "expected at least one dimension column",
                ));
            }
            if prefer.len() != dims.len() {
                return Err(Error::param(
                    "prefer",
                    format!(
                        "expected one preference per dimension ({}), got {}",
                        dims.len(),
                        prefer.len()
                    ),
                ));
            }
        }
        for (i, c) in cols.iter().enumerate() {
            if c.is_empty() {
                return Err(Error::param(self.value_param(), "expected a column name"));
            }
            if cols[..i].contains(c) {
                return Err(Error::param(
                    self.value_param(),
                    format!("column '{c}' is listed twice"),
                ));
            }
        }
        Ok(())
    }
}

/// Options of a preference operator (one source). `window` carries the parameters every windowed operator
/// takes.
#[derive(Debug, Clone)]
pub struct PreferenceOptions {
    pub window: WindowOptions,
    pub query: QueryKind,
    pub strategy: PreferenceStrategy,
}

impl PreferenceOptions {
    pub fn new(time: impl Into<String>, size: Span, query: QueryKind) -> Self {
        Self {
            window: WindowOptions::new(time, size),
            query,
            strategy: PreferenceStrategy::Auto,
        }
    }

    pub fn validate(&self) -> Result<()> {
        self.window.validate()?;
        crate::order::admission::refuse_keep(self.window.on_late, "the preference queries")?;
        self.query.validate()
    }
}
