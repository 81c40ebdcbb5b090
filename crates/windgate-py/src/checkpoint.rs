//! Checkpoint plumbing shared by the streaming classes: what a snapshot says about itself, and the runtime
//! overrides a restore may take.

use std::collections::BTreeMap;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use windgate_core::snapshot;

use windgate_core::window_options::FarmOptions;

use crate::convert::{farm_options, threads_opt};
use crate::errors::{detached, to_py};

/// The annotation key of the Python classes' normalised keyword arguments (`windgate._checkpoint`).
pub const KWARGS_KEY: &str = "python.kwargs";

/// `{"operator", "version", "params", "annotations"}` of a snapshot, after checking it is whole. `params`
/// is the core's JSON text.
#[pyfunction]
pub fn snapshot_info<'py>(py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyDict>> {
    let (operator, version, params, annotations) = snapshot::describe(data).map_err(to_py)?;
    let d = PyDict::new(py);
    d.set_item("operator", operator)?;
    d.set_item("version", version)?;
    d.set_item("params", params.to_string())?;
    d.set_item("annotations", annotations)?;
    Ok(d)
}

/// The annotations a snapshot carries: the Python class's keyword arguments, if given.
pub fn annotations(note: Option<String>) -> BTreeMap<String, String> {
    note.map(|n| BTreeMap::from([(KWARGS_KEY.to_string(), n)]))
        .unwrap_or_default()
}

/// Runs `write` without the GIL and returns its bytes.
pub fn snapshot_bytes<'py>(
    py: Python<'py>,
    write: impl FnOnce() -> windgate_core::Result<Vec<u8>> + Send,
) -> PyResult<Bound<'py, PyBytes>> {
    let bytes = detached(py, "snapshot", write).map_err(to_py)?;
    Ok(PyBytes::new(py, &bytes))
}

/// The runtime settings a restore may change, as the caller gave them (`None`: keep the snapshot's).
pub struct Runtime {
    /// `Some(None)`: `threads=None`, all cores.
    pub threads: Option<Option<usize>>,
    pub strategy: Option<String>,
    pub farm: Option<FarmOptions>,
}

impl Runtime {
    /// Reads `threads`, `strategy` and `farm` from the overrides, converted as the constructors do.
    pub fn read(overrides: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        let threads = match given(overrides, "threads")? {
            Some(t) if t.is_none() => Some(None),
            Some(t) => Some(threads_opt(Some(t.extract()?))?),
            None => None,
        };
        let strategy = given(overrides, "strategy")?
            .map(|s| s.extract())
            .transpose()?;
        let farm = match given(overrides, "farm")? {
            Some(f) if f.is_none() => Some(farm_options(None)?),
            Some(f) => Some(farm_options(Some(f.cast::<PyDict>()?))?),
            None => None,
        };
        Ok(Self {
            threads,
            strategy,
            farm,
        })
    }
}

impl Runtime {
    /// Sets the given `threads` and `farm` on a windowed operator's options; returns the strategy name
    /// to parse, if one was given (each operator has its own strategy type).
    pub fn apply(self, threads: &mut Option<usize>, farm: &mut FarmOptions) -> Option<String> {
        if let Some(t) = self.threads {
            *threads = t;
        }
        if let Some(f) = self.farm {
            *farm = f;
        }
        self.strategy
    }
}

/// The value of a runtime override, if the caller gave it (`None` as a value is kept: `threads=None`).
pub fn given<'py>(
    overrides: Option<&Bound<'py, PyDict>>,
    name: &str,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    match overrides {
        Some(d) => d.get_item(name),
        None => Ok(None),
    }
}
