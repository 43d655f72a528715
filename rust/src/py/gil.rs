//! The one GIL-release helper: `py.enter_core(|| engine_call())`.
//!
//! Every blocking engine call (append, read, flush, open, close, truncate, retention,
//! sendfile) goes through it. Arguments are extracted and copied into Rust values *before*
//! entering; the `Ungil` bound on `Python::detach` keeps Python objects out of the closure.
//! The closure's error type is converted to `PyErr` on the way out (`LogError` through
//! `errors.rs`, `io::Error` through pyo3's errno mapping, e.g. EAGAIN → `BlockingIOError`).
use pyo3::marker::Ungil;
use pyo3::prelude::*;

pub trait EnterCore {
    fn enter_core<T, E, F>(self, f: F) -> PyResult<T>
    where
        F: Ungil + FnOnce() -> Result<T, E>,
        T: Send,
        E: Send + Into<PyErr>;
}

impl EnterCore for Python<'_> {
    fn enter_core<T, E, F>(self, f: F) -> PyResult<T>
    where
        F: Ungil + FnOnce() -> Result<T, E>,
        T: Send,
        E: Send + Into<PyErr>,
    {
        self.detach(f).map_err(Into::into)
    }
}
