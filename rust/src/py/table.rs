//! `TableDataFiles`: the data files of one Iceberg table commit (see `crate::table`), written
//! with the GIL released.
use std::sync::{Arc, Mutex};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use super::columnar::{column, program};
use super::gil::EnterCore;
use super::log::{extract_bytes, PyLog};
use crate::table::{data_files, DataFiles, FileSettings, TableError};

#[pyclass(name = "TableDataFiles", module = "logbroker._core", frozen)]
pub struct PyTableDataFiles {
    files: Mutex<Option<DataFiles>>,
}

impl PyTableDataFiles {
    fn with<T>(&self, f: impl FnOnce(&mut DataFiles) -> Result<T, TableError>) -> Result<T, TableError> {
        let mut g = self.files.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let files = g.as_mut().ok_or_else(|| TableError::Config("the commit's files are already closed".into()))?;
        f(files)
    }

    fn take(&self) -> Result<DataFiles, TableError> {
        let mut g = self.files.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        g.take().ok_or_else(|| TableError::Config("the commit's files are already closed".into()))
    }
}

#[pymethods]
impl PyTableDataFiles {
    /// `schema`: the table's pyarrow schema, serialized (`pa.Schema.serialize()`), field ids
    /// in `PARQUET:field_id`. `location`: the table's data location (a path or URL; files of
    /// a non-local one are kept in memory and returned by `close`). `value_tree` and
    /// `value_programs` as `decode_avro_columns` takes them, for tables with value columns.
    #[new]
    #[allow(clippy::too_many_arguments)] // the Python constructor's arguments, one by one (_core.pyi)
    #[pyo3(signature = (schema, location, prefix, codec, level, row_group_bytes, target_file_bytes, value_tree=None, value_programs=None))]
    fn new(
        schema: &Bound<'_, PyAny>,
        location: String,
        prefix: String,
        codec: String,
        level: Option<i32>,
        row_group_bytes: usize,
        target_file_bytes: usize,
        value_tree: Option<Vec<(String, Vec<usize>)>>,
        value_programs: Option<Vec<(i32, Bound<'_, PyAny>)>>,
    ) -> PyResult<Self> {
        let schema = extract_bytes(schema)?;
        let schema = arrow_ipc::convert::try_schema_from_ipc_buffer(&schema)
            .map_err(|e| PyValueError::new_err(format!("the table's schema does not decode: {e}")))?;
        let values = match (value_tree, value_programs) {
            (Some(tree), Some(programs)) => Some(data_files::ValueDecoding {
                tree: tree.into_iter().map(|(k, c)| column(&k, c)).collect::<PyResult<Vec<_>>>()?,
                programs: programs.into_iter().map(|(id, p)| Ok((id, program(&p)?))).collect::<PyResult<Vec<_>>>()?,
            }),
            (None, None) => None,
            _ => return Err(PyValueError::new_err("value_tree and value_programs go together")),
        };
        let settings =
            FileSettings { compression: data_files::compression(&codec, level)?, row_group_bytes, target_file_bytes };
        let files = DataFiles::new(Arc::new(schema), settings, data_files::location(&location), prefix, values)?;
        Ok(PyTableDataFiles { files: Mutex::new(Some(files)) })
    }

    /// Writes `log`'s records over `[start, end)`, read_committed, up to `max_bytes` of log;
    /// returns `{"next_offset", "rows", "read_bytes", "failures", "first_failure"}`
    /// (first_failure: `(offset, reason)` of a value that did not decode, or None).
    fn write_log<'py>(
        &self,
        py: Python<'py>,
        log: &PyLog,
        start: i64,
        end: i64,
        max_bytes: u64,
    ) -> PyResult<Bound<'py, PyDict>> {
        let shared = log.shared();
        let w = py.enter_core(|| self.with(|f| f.write_log(&shared, start, end, max_bytes)))?;
        let d = PyDict::new(py);
        d.set_item("next_offset", w.next_offset)?;
        d.set_item("rows", w.rows)?;
        d.set_item("read_bytes", w.read_bytes)?;
        d.set_item("failures", w.failures)?;
        d.set_item("first_failure", w.first_failure)?;
        Ok(d)
    }

    /// Closes the files; returns `[{"path", "day", "partition", "min_offset", "max_offset", "rows", "bytes", "contents"}]`
    /// (contents: the file's bytes when the location is not local, else None).
    fn close<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let files = self.take()?;
        let written = py.enter_core(|| files.close())?;
        let out = PyList::empty(py);
        for w in written {
            let d = PyDict::new(py);
            d.set_item("path", &w.path)?;
            d.set_item("day", w.day)?;
            d.set_item("partition", w.partition)?;
            d.set_item("min_offset", w.min_offset)?;
            d.set_item("max_offset", w.max_offset)?;
            d.set_item("rows", w.rows)?;
            d.set_item("bytes", w.bytes)?;
            d.set_item("contents", w.contents.as_deref().map(|c| PyBytes::new(py, c)))?;
            out.append(d)?;
        }
        Ok(out)
    }

    /// Drops the commit, removing the local files written so far (none is in the table).
    fn abort(&self, py: Python<'_>) {
        let files = self.files.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        if let Some(f) = files {
            py.detach(|| f.abort());
        }
    }
}
