//! `decode_columns`: record batches to Arrow-layout buffers (see `crate::columnar`).
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use super::gil::EnterCore;
use super::log::extract_bytes;
use crate::client::records::AbortedTxn;
use crate::columnar;

/// Decodes the whole batches in `records` into Arrow-layout buffers for records with offsets
/// in `[start_offset, end_offset)`; returns a dict (see `python/logbroker/_core.pyi`).
#[pyfunction]
#[pyo3(signature = (records, start_offset, end_offset, include_headers=false, aborted=None))]
pub fn decode_columns<'py>(
    py: Python<'py>,
    records: &Bound<'py, PyAny>,
    start_offset: i64,
    end_offset: i64,
    include_headers: bool,
    aborted: Option<Vec<(i64, i64)>>,
) -> PyResult<Bound<'py, PyDict>> {
    let bytes = extract_bytes(records)?;
    let aborted: Option<Vec<AbortedTxn>> =
        aborted.map(|a| a.into_iter().map(|(producer_id, first_offset)| AbortedTxn { producer_id, first_offset }).collect());
    let c = py.enter_core(|| columnar::decode_columns(&bytes, start_offset, end_offset, include_headers, aborted.as_deref()))?;
    let d = PyDict::new(py);
    let b = |v: &[u8]| PyBytes::new(py, v);
    d.set_item("count", c.count)?;
    d.set_item("next_offset", c.next_offset)?;
    d.set_item("offset", b(&c.offset))?;
    d.set_item("timestamp_us", b(&c.timestamp_us))?;
    d.set_item("timestamp_type", b(&c.timestamp_type))?;
    for (name, col) in [("key", &c.key), ("value", &c.value), ("header_key", &c.header_keys), ("header_value", &c.header_values)] {
        d.set_item(format!("{name}_validity"), b(&col.validity))?;
        d.set_item(format!("{name}_offsets"), b(&col.offsets))?;
        d.set_item(format!("{name}_data"), b(&col.data))?;
        d.set_item(format!("{name}_nulls"), col.nulls)?;
    }
    d.set_item("header_list_offsets", b(&c.header_list_offsets))?;
    Ok(d)
}
