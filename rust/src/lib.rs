//! logbroker's native core, exposed to Python as `logbroker._core`.
//!
//! This file is a table of contents: engine modules never import pyo3; every
//! `#[pyclass]`/`#[pyfunction]` lives under `py/`.

pub mod py;

use pyo3::prelude::*;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    py::register(m)
}
