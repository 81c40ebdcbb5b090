//! PyO3 bindings of windgate: convert Python arguments, release the GIL, call `windgate-core`, convert back.
//! No logic lives here.

mod band_join;
mod checkpoint;
mod convert;
mod errors;
mod pipeline;
mod preference;
mod registry;
mod tpcxbb;
mod window_aggregate;

use pyo3::prelude::*;

/// mimalloc for every Rust allocation of the extension (Arrow buffers included: they are freed through
/// their own release callbacks, so by this allocator too). See Cargo.toml for why.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(window_aggregate::window_aggregate, m)?)?;
    m.add_class::<window_aggregate::WindowAggregator>()?;
    m.add_function(wrap_pyfunction!(band_join::band_join, m)?)?;
    m.add_class::<band_join::BandJoiner>()?;
    m.add_function(wrap_pyfunction!(preference::preference, m)?)?;
    m.add_class::<preference::PreferenceQuery>()?;
    m.add_function(wrap_pyfunction!(convert::duration_units, m)?)?;
    m.add_function(wrap_pyfunction!(pipeline::run_pipeline, m)?)?;
    m.add_function(wrap_pyfunction!(pipeline::pipeline_schema, m)?)?;
    m.add_function(wrap_pyfunction!(tpcxbb::tpcxbb_generate, m)?)?;
    m.add_function(wrap_pyfunction!(tpcxbb::tpcxbb_query, m)?)?;
    m.add_function(wrap_pyfunction!(registry::strategies, m)?)?;
    m.add_function(wrap_pyfunction!(checkpoint::snapshot_info, m)?)?;
    Ok(())
}
