//! `decode_columns`: record batches to Arrow-layout buffers (see `crate::columnar`); and
//! the value programs and reader trees of Iceberg topics' value columns from Python's
//! tuples (see `crate::avro_columns`, `crate::json_columns`, `crate::proto_columns`), for
//! `TableDataFiles` (table.rs).
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use super::gil::EnterCore;
use super::log::extract_bytes;
use crate::avro_columns::{decode_avro_columns, Column, Kind, Program};
use crate::client::records::AbortedTxn;
use crate::columnar;
use crate::proto_columns::{ProtoField, ProtoType};
use crate::table::record_arrays;

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
    let aborted: Option<Vec<AbortedTxn>> = aborted
        .map(|a| a.into_iter().map(|(producer_id, first_offset)| AbortedTxn { producer_id, first_offset }).collect());
    let c = py.enter_core(|| {
        columnar::decode_columns(&bytes, start_offset, end_offset, include_headers, aborted.as_deref())
    })?;
    let d = PyDict::new(py);
    let b = |v: &[u8]| PyBytes::new(py, v);
    d.set_item("count", c.count)?;
    d.set_item("next_offset", c.next_offset)?;
    d.set_item("offset", b(&c.offset))?;
    d.set_item("timestamp_us", b(&c.timestamp_us))?;
    d.set_item("timestamp_type", b(&c.timestamp_type))?;
    for (name, col) in
        [("key", &c.key), ("value", &c.value), ("header_key", &c.header_keys), ("header_value", &c.header_values)]
    {
        d.set_item(format!("{name}_validity"), b(&col.validity))?;
        d.set_item(format!("{name}_offsets"), b(&col.offsets))?;
        d.set_item(format!("{name}_data"), b(&col.data))?;
        d.set_item(format!("{name}_nulls"), col.nulls)?;
    }
    d.set_item("header_list_offsets", b(&c.header_list_offsets))?;
    Ok(d)
}

/// Decodes Confluent-framed values (a binary column's Arrow buffers: `count` values,
/// `validity` bitmap, i32 `offsets`, `data`) into `schema`'s three columns (the struct of
/// `tree`, the schema id, the raw bytes of a value that did not decode) with `programs`
/// (schema id, program); returns `(Arrow IPC stream of the batch, failures, first failure as
/// (row, reason) or None)`. Releases the GIL.
#[pyfunction]
#[allow(clippy::type_complexity, clippy::too_many_arguments)] // the Python function's arguments and tuple, as _core.pyi has them
pub fn decode_registry_values<'py>(
    py: Python<'py>,
    count: usize,
    validity: &Bound<'py, PyAny>,
    offsets: &Bound<'py, PyAny>,
    data: &Bound<'py, PyAny>,
    schema: &Bound<'py, PyAny>,
    tree: Vec<(String, Vec<usize>)>,
    programs: Vec<(i32, Bound<'py, PyAny>)>,
) -> PyResult<(Bound<'py, PyBytes>, usize, Option<(usize, String)>)> {
    let (validity, offsets, data) = (extract_bytes(validity)?, extract_bytes(offsets)?, extract_bytes(data)?);
    let schema = arrow_ipc::convert::try_schema_from_ipc_buffer(&extract_bytes(schema)?)
        .map_err(|e| PyValueError::new_err(format!("the decoded values' schema does not decode: {e}")))?;
    let tree = tree.into_iter().map(|(k, c)| column(&k, c)).collect::<PyResult<Vec<_>>>()?;
    let programs = programs.into_iter().map(|(id, p)| Ok((id, program(&p)?))).collect::<PyResult<Vec<_>>>()?;
    let (ipc, failures, first) = py.detach(|| -> PyResult<_> {
        let c = decode_avro_columns(count, &validity, &offsets, &data, &tree, &programs)?;
        let (failures, first) = (c.failures, c.first_failure.clone());
        let schema = std::sync::Arc::new(schema);
        let batch = record_arrays::decoded_batch(&schema, &tree, c).map_err(PyValueError::new_err)?;
        let mut out = Vec::new();
        let mut w = arrow_ipc::writer::StreamWriter::try_new(&mut out, &schema)
            .map_err(|e| PyValueError::new_err(format!("writing the decoded values: {e}")))?;
        w.write(&batch)
            .and_then(|()| w.finish())
            .map_err(|e| PyValueError::new_err(format!("writing the decoded values: {e}")))?;
        drop(w);
        Ok((out, failures, first))
    })?;
    Ok((PyBytes::new(py, &ipc), failures, first))
}

/// Encodes the struct rows of the first column of `batch` (an Arrow IPC stream holding one
/// record batch) as Confluent-framed values of `schema_id` in `format` (avro, json or
/// protobuf; crate::registry_encode); returns the values as a binary
/// column's Arrow buffers `(validity, offsets, data, null count)`, a null row a null value.
/// Releases the GIL.
#[pyfunction]
#[pyo3(signature = (batch, schema_id, format="avro"))]
#[allow(clippy::type_complexity)] // the Python tuple, as _core.pyi has it
pub fn encode_registry_values<'py>(
    py: Python<'py>,
    batch: &Bound<'py, PyAny>,
    schema_id: i32,
    format: &str,
) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>, Bound<'py, PyBytes>, usize)> {
    use arrow_array::cast::AsArray;
    let format = crate::registry_encode::Format::parse(format).map_err(PyValueError::new_err)?;
    let ipc = extract_bytes(batch)?;
    let e = py.detach(|| -> Result<crate::registry_encode::Encoded, String> {
        let mut reader = arrow_ipc::reader::StreamReader::try_new(std::io::Cursor::new(ipc), None)
            .map_err(|e| format!("the rows to encode do not decode as Arrow IPC: {e}"))?;
        let batch = reader
            .next()
            .ok_or("the Arrow IPC stream holds no record batch")?
            .map_err(|e| format!("the rows to encode do not decode as Arrow IPC: {e}"))?;
        let column = batch.columns().first().ok_or("the record batch has no column")?;
        let rows = column
            .as_struct_opt()
            .ok_or_else(|| format!("the column to encode is {}, not a struct", column.data_type()))?;
        crate::registry_encode::encode_rows_as(rows, schema_id, format)
    });
    let e = e.map_err(PyValueError::new_err)?;
    Ok((PyBytes::new(py, &e.validity), PyBytes::new(py, &e.offsets), PyBytes::new(py, &e.data), e.nulls))
}

fn target(t: i64) -> Option<usize> {
    usize::try_from(t).ok()
}

/// A writer program from Python's nested tuples (logbroker/iceberg/value_schema.py):
/// `(kind, target, ...)` with target -1 for none; see `crate::avro_columns::Program`.
pub(crate) fn program(obj: &Bound<'_, PyAny>) -> PyResult<Program> {
    let kind: String = obj.get_item(0)?.extract()?;
    let t = || -> PyResult<Option<usize>> { Ok(target(obj.get_item(1)?.extract()?)) };
    Ok(match kind.as_str() {
        "null" => Program::Null { target: t()? },
        "boolean" => Program::Boolean { target: t()? },
        "int" => Program::Int { target: t()? },
        "long" => {
            let scale = if obj.len()? > 2 { obj.get_item(2)?.extract()? } else { 1 };
            Program::Long { target: t()?, scale }
        }
        "float" => Program::Float { target: t()? },
        "double" => Program::Double { target: t()? },
        "bytes" | "string" => Program::Bytes { target: t()? },
        "enum" => Program::Enum { target: t()?, symbols: obj.get_item(2)?.extract()? },
        "fixed" => Program::Fixed { target: t()?, size: obj.get_item(2)?.extract()? },
        "record" => {
            let fields = obj.get_item(2)?;
            let fields = fields.cast::<PyList>()?.iter().map(|f| program(&f)).collect::<PyResult<Vec<_>>>()?;
            Program::Record { target: t()?, fields, missing: obj.get_item(3)?.extract()? }
        }
        "union" => {
            let branches = obj.get_item(2)?;
            let branches = branches.cast::<PyList>()?.iter().map(|b| program(&b)).collect::<PyResult<Vec<_>>>()?;
            Program::Union { branches }
        }
        "array" => Program::Array { target: t()?, items: Box::new(program(&obj.get_item(2)?)?) },
        "json_object" => {
            let fields = obj.get_item(2)?;
            let fields = fields
                .cast::<PyList>()?
                .iter()
                .map(|f| Ok((f.get_item(0)?.extract()?, program(&f.get_item(1)?)?)))
                .collect::<PyResult<Vec<_>>>()?;
            Program::JsonObject { target: json_target(t()?)?, fields }
        }
        "json_array" => Program::JsonArray { target: json_target(t()?)?, items: Box::new(program(&obj.get_item(2)?)?) },
        "json_value" => Program::JsonValue { target: json_target(t()?)? },
        "proto_message" => {
            let fields = obj.get_item(2)?;
            let fields = fields.cast::<PyList>()?.iter().map(|f| proto_field(&f)).collect::<PyResult<Vec<_>>>()?;
            Program::ProtoMessage { target: t()?, fields, missing: obj.get_item(3)?.extract()? }
        }
        other => return Err(PyValueError::new_err(format!("unknown value program kind {other:?}"))),
    })
}

/// `(number, type, repeated, presence, column, extra)`: extra is the enum's (number, name)
/// pairs or the message's program, else None; see `crate::proto_columns::ProtoField`.
fn proto_field(f: &Bound<'_, PyAny>) -> PyResult<ProtoField> {
    let ty: String = f.get_item(1)?.extract()?;
    let extra = f.get_item(5)?;
    let ty = match ty.as_str() {
        "double" => ProtoType::Double,
        "float" => ProtoType::Float,
        "int32" => ProtoType::Int32,
        "int64" => ProtoType::Int64,
        "uint32" => ProtoType::UInt32,
        "uint64" => ProtoType::UInt64,
        "sint32" => ProtoType::SInt32,
        "sint64" => ProtoType::SInt64,
        "fixed32" => ProtoType::Fixed32,
        "fixed64" => ProtoType::Fixed64,
        "sfixed32" => ProtoType::SFixed32,
        "sfixed64" => ProtoType::SFixed64,
        "bool" => ProtoType::Bool,
        "string" => ProtoType::String,
        "bytes" => ProtoType::Bytes,
        "enum" => ProtoType::Enum(extra.extract()?),
        "message" => ProtoType::Message(Box::new(program(&extra)?)),
        other => return Err(PyValueError::new_err(format!("unknown Protobuf type {other:?}"))),
    };
    Ok(ProtoField {
        number: f.get_item(0)?.extract()?,
        ty,
        repeated: f.get_item(2)?.extract()?,
        presence: f.get_item(3)?.extract()?,
        column: target(f.get_item(4)?.extract()?),
    })
}

fn json_target(t: Option<usize>) -> PyResult<usize> {
    t.ok_or_else(|| PyValueError::new_err("a JSON program part names no column"))
}

pub(crate) fn column(kind: &str, children: Vec<usize>) -> PyResult<Column> {
    let kind = match kind {
        "boolean" => Kind::Boolean,
        "int" => Kind::Int,
        "long" => Kind::Long,
        "float" => Kind::Float,
        "double" => Kind::Double,
        "binary" => Kind::Binary,
        "string" => Kind::String,
        "struct" => Kind::Struct,
        "list" => Kind::List,
        other => return Err(PyValueError::new_err(format!("unknown column kind {other:?}"))),
    };
    Ok(Column { kind, children })
}
