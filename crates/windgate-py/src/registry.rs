//! `strategies(operator)`: each operator's strategy registry as Python sees it, for the CLI's choices and
//! the documentation checks. The tables themselves live in the core (`windgate_core::registry`).

use pyo3::prelude::*;
use pyo3::types::PyDict;
use windgate_core::Error;
use windgate_core::aggregate::Strategy;
use windgate_core::join::JoinStrategy;
use windgate_core::preference::PreferenceStrategy;
use windgate_core::registry::StrategyDoc;

use crate::errors::to_py;

/// The operators with a `strategy=` parameter, in the order `strategies` documents them.
const OPERATORS: [&str; 3] = ["window_aggregate", "band_join", "preference"];

/// Every strategy of `operator` in registry order, as dicts: `name`, `doc`, `role` (`"production"`,
/// `"reference"` or `"baseline"`), `parallel`, `farm_options`, `sorted_sources`.
#[pyfunction]
pub fn strategies<'py>(py: Python<'py>, operator: &str) -> PyResult<Vec<Bound<'py, PyDict>>> {
    let docs: Vec<&StrategyDoc> = match operator {
        "window_aggregate" => Strategy::all().collect(),
        "band_join" => JoinStrategy::all().collect(),
        "preference" => PreferenceStrategy::all().collect(),
        other => {
            return Err(to_py(Error::param(
                "operator",
                format!("unknown operator {other:?}; expected one of {OPERATORS:?}"),
            )));
        }
    };
    docs.into_iter()
        .map(|d| {
            let out = PyDict::new(py);
            out.set_item("name", d.name)?;
            out.set_item("doc", d.doc)?;
            out.set_item("role", d.caps.role.name())?;
            out.set_item("parallel", d.caps.parallel)?;
            out.set_item("farm_options", d.caps.farm_options)?;
            out.set_item("sorted_sources", d.caps.sorted_sources)?;
            Ok(out)
        })
        .collect()
}
