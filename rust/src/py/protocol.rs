//! `protocol_reencode`: the Rust Kafka codec seen from Python (the codec's cross-check
//! against the Python codec in tests/test_protocol_rust.py).
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::log::extract_bytes;
use crate::protocol::{messages, Bytes};

/// Decodes a message body with the Rust codec and encodes it again at the same version:
/// `(bytes, consumed)`. `api_key` -1 means the request header (`request` true) or the
/// response header. Malformed input raises `KafkaProtocolError` naming field and position.
#[pyfunction]
pub fn protocol_reencode(py: Python<'_>, api_key: i16, version: i16, request: bool, body: &Bound<'_, PyAny>)
    -> PyResult<(Py<PyBytes>, usize)> {
    let body = Bytes::from(extract_bytes(body)?);
    let (out, used) = py.detach(|| {
        if api_key == -1 {
            messages::reencode_header(version, request, &body)
        } else {
            messages::reencode(api_key, version, request, &body)
        }
    })?;
    Ok((PyBytes::new(py, &out).unbind(), used))
}
