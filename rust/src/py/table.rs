//! `TableDataFiles`: the data files of one Iceberg table commit (see `crate::table`), written
//! with the GIL released.
use std::sync::{Arc, Mutex};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use super::columnar::{column, program};
use super::gil::EnterCore;
use super::log::{extract_bytes, PyLog};
use crate::table::partition_spec::{PartitionSpec, PartitionValue, SpecField, Transform};
use crate::table::{data_files, DataFiles, FileSettings, KeyIndex, TableError};

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
    /// `value_programs` as `decode_avro_columns` takes them, for tables with value columns;
    /// `key_tree` and `key_programs` the same for the `key_struct` column. `dead_letters`:
    /// values that do not decode become dead letters (`take_dead_letters`), not `value_raw`.
    /// `partition_spec`: the table's current spec as `(source column path, transform, name)`
    /// per field (`("value.id", "bucket[16]", "value_id_bucket")`); None: `day(timestamp)`.
    #[new]
    #[allow(clippy::too_many_arguments)] // the Python constructor's arguments, one by one (_core.pyi)
    #[pyo3(signature = (schema, location, prefix, codec, level, row_group_bytes, target_file_bytes, value_tree=None, value_programs=None, key_tree=None, key_programs=None, dead_letters=false, partition_spec=None))]
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
        key_tree: Option<Vec<(String, Vec<usize>)>>,
        key_programs: Option<Vec<(i32, Bound<'_, PyAny>)>>,
        dead_letters: bool,
        partition_spec: Option<Vec<(String, String, String)>>,
    ) -> PyResult<Self> {
        let schema = extract_bytes(schema)?;
        let schema = arrow_ipc::convert::try_schema_from_ipc_buffer(&schema)
            .map_err(|e| PyValueError::new_err(format!("the table's schema does not decode: {e}")))?;
        let decoding = |tree: Option<Vec<(String, Vec<usize>)>>,
                        programs: Option<Vec<(i32, Bound<'_, PyAny>)>>,
                        what: &str|
         -> PyResult<Option<data_files::ValueDecoding>> {
            match (tree, programs) {
                (Some(tree), Some(programs)) => Ok(Some(data_files::ValueDecoding {
                    tree: tree.into_iter().map(|(k, c)| column(&k, c)).collect::<PyResult<Vec<_>>>()?,
                    programs: programs
                        .into_iter()
                        .map(|(id, p)| Ok((id, program(&p)?)))
                        .collect::<PyResult<Vec<_>>>()?,
                })),
                (None, None) => Ok(None),
                _ => Err(PyValueError::new_err(format!("{what}_tree and {what}_programs go together"))),
            }
        };
        let values = decoding(value_tree, value_programs, "value")?;
        let keys = decoding(key_tree, key_programs, "key")?;
        let settings =
            FileSettings { compression: data_files::compression(&codec, level)?, row_group_bytes, target_file_bytes };
        let files = DataFiles::new(Arc::new(schema), settings, data_files::location(&location), prefix, values)?
            .with_keys(keys)
            .with_dead_letters(dead_letters);
        let files = match partition_spec {
            None => files,
            Some(fields) => files.with_spec(PartitionSpec {
                fields: fields
                    .into_iter()
                    .map(|(source, transform, name)| {
                        Ok(SpecField {
                            source: source.split('.').map(str::to_owned).collect(),
                            transform: Transform::parse(&transform).map_err(PyValueError::new_err)?,
                            name,
                        })
                    })
                    .collect::<PyResult<Vec<_>>>()?,
            }),
        };
        Ok(PyTableDataFiles { files: Mutex::new(Some(files)) })
    }

    /// Writes `log`'s records over `[start, end)`, read_committed, up to `max_bytes` of log;
    /// returns `{"next_offset", "rows", "read_bytes", "failures", "first_failure"}`
    /// (first_failure: `(offset, reason)` of a value that did not decode, or None).
    /// `key_index`: the partition's, for an upsert table (one row per key; the index's
    /// changes are this commit's until `TableKeyIndex.settle`).
    #[pyo3(signature = (log, start, end, max_bytes, key_index=None))]
    fn write_log<'py>(
        &self,
        py: Python<'py>,
        log: &PyLog,
        start: i64,
        end: i64,
        max_bytes: u64,
        key_index: Option<&PyTableKeyIndex>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let shared = log.shared();
        let index = key_index.map(|k| Arc::clone(&k.0));
        let w = py.enter_core(|| self.with(|f| f.write_log(&shared, start, end, max_bytes, index)))?;
        let d = PyDict::new(py);
        d.set_item("next_offset", w.next_offset)?;
        d.set_item("rows", w.rows)?;
        d.set_item("read_bytes", w.read_bytes)?;
        d.set_item("failures", w.failures)?;
        d.set_item("first_failure", w.first_failure)?;
        Ok(d)
    }

    /// The dead letters of what was written so far (rows of the dead-letter table, see
    /// rust/src/table/dead_letters.rs) as an Arrow IPC stream, or None.
    fn take_dead_letters<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let ipc = py.enter_core(|| self.with(DataFiles::take_dead_letters))?;
        Ok(ipc.map(|b| PyBytes::new(py, &b)))
    }

    /// Closes the files; returns `[{"path", "day", "partition_values", "partition", "min_offset", "max_offset", "rows", "bytes", "contents",
    /// "deletes", "path_bounds"}]` (contents: the file's bytes when the location is not local, else None; deletes:
    /// a position delete file, whose rows are `rows` and whose file_path bounds are `path_bounds`).
    fn close<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let files = self.take()?;
        let written = py.enter_core(|| files.close())?;
        let out = PyList::empty(py);
        for w in written {
            let d = PyDict::new(py);
            d.set_item("path", &w.path)?;
            d.set_item("day", w.day)?;
            let values = PyList::empty(py);
            for v in &w.partition_values {
                match v {
                    PartitionValue::Null => values.append(py.None())?,
                    PartitionValue::Int(i) => values.append(*i)?,
                    PartitionValue::Str(t) => values.append(t)?,
                    PartitionValue::Bytes(b) => values.append(PyBytes::new(py, b))?,
                }
            }
            d.set_item("partition_values", values)?;
            d.set_item("partition", w.partition)?;
            d.set_item("min_offset", w.min_offset)?;
            d.set_item("max_offset", w.max_offset)?;
            d.set_item("rows", w.rows)?;
            d.set_item("bytes", w.bytes)?;
            d.set_item("contents", w.contents.as_deref().map(|c| PyBytes::new(py, c)))?;
            d.set_item("deletes", w.deletes)?;
            d.set_item("path_bounds", w.path_bounds)?;
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

/// The key index of one partition of an upsert table (`crate::table::key_index`).
#[pyclass(name = "TableKeyIndex", module = "logbroker._core", frozen)]
pub struct PyTableKeyIndex(Arc<Mutex<KeyIndex>>);

impl PyTableKeyIndex {
    fn lock(&self) -> std::sync::MutexGuard<'_, KeyIndex> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[pymethods]
impl PyTableKeyIndex {
    #[new]
    fn new() -> Self {
        PyTableKeyIndex(Arc::new(Mutex::new(KeyIndex::new())))
    }

    /// Live keys.
    fn __len__(&self) -> usize {
        self.lock().len()
    }

    /// Adds a data file's live rows, rebuilding from the table: its key column as a pyarrow
    /// BinaryArray's buffers (`validity` None when it has no nulls; `offset` and `length` the
    /// array's) and the positions its position deletes name (int64, little-endian). Returns
    /// how many rows it found live under a key a later row holds (the next commit deletes them).
    #[allow(clippy::too_many_arguments)] // a pyarrow array's buffers, one by one (_core.pyi)
    #[pyo3(signature = (path, day, validity, offsets, data, offset, length, deleted))]
    fn add_file(
        &self,
        py: Python<'_>,
        path: &str,
        day: i32,
        validity: Option<&Bound<'_, PyAny>>,
        offsets: &Bound<'_, PyAny>,
        data: &Bound<'_, PyAny>,
        offset: usize,
        length: usize,
        deleted: &Bound<'_, PyAny>,
    ) -> PyResult<usize> {
        let deleted: Vec<u64> = extract_bytes(deleted)?
            .chunks_exact(8)
            .map(|b| u64::try_from(i64::from_le_bytes(b.try_into().expect("8 bytes"))).unwrap_or(u64::MAX))
            .collect();
        let validity = validity.map(extract_bytes).transpose()?;
        let offsets = extract_bytes(offsets)?;
        let data = extract_bytes(data)?;
        if offsets.len() < (offset + length + 1) * 4 || validity.as_ref().is_some_and(|v| v.len() * 8 < offset + length)
        {
            return Err(PyValueError::new_err(format!(
                "key column of {path}: buffers too short for {length} rows at offset {offset}"
            )));
        }
        let at = |i: usize| {
            let k = (offset + i) * 4;
            usize::try_from(i32::from_le_bytes(offsets[k..k + 4].try_into().expect("4 bytes"))).unwrap_or(usize::MAX)
        };
        for i in 0..length {
            if at(i) > at(i + 1) || at(i + 1) > data.len() {
                return Err(PyValueError::new_err(format!("key column of {path}: bad offsets at row {i}")));
            }
        }
        let valid = |i: usize| validity.as_ref().is_none_or(|v| v[(offset + i) / 8] & (1 << ((offset + i) % 8)) != 0);
        let keys = (0..length).map(|i| valid(i).then(|| &data[at(i)..at(i + 1)]));
        let index = Arc::clone(&self.0);
        Ok(py.detach(|| {
            index.lock().unwrap_or_else(std::sync::PoisonError::into_inner).add_file(path, day, keys, &deleted)
        }))
    }

    /// Ends the commit whose `write_log` changed the index: `landed` keeps its changes,
    /// otherwise they are undone.
    fn settle(&self, landed: bool) {
        self.lock().settle(landed);
    }
}
