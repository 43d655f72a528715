//! Arrow struct rows to Confluent-framed values: what the Spark sink writes with
//! `value.format=registry` (python/logbroker/spark/registry.py generates the writer schema
//! from the same Arrow type, by the same rules, and registers it for the schema id). Avro
//! here; JSON (`value.schema.type=json`) in json_encode.rs, Protobuf in proto_encode.rs.
//!
//! Each value is a magic byte 0, the schema id (4 bytes, big-endian), for Protobuf the
//! message indexes (one 0 byte: the schema's first message), then the row. As Avro, the
//! row is the binary encoding of a record of the struct's fields, every field `["null", T]`
//! (branch 0 null, branch 1 the value):
//!
//! | Arrow | Avro T |
//! | --- | --- |
//! | boolean | boolean (one byte) |
//! | int8, int16, int32 | int (zigzag varint) |
//! | int64 | long (zigzag varint) |
//! | float32, float64 | float, double (little-endian) |
//! | utf8, large utf8 | string (length, bytes) |
//! | binary, large binary | bytes (length, bytes) |
//! | date32 | int, logicalType date (days) |
//! | timestamp (any unit; with a time zone) | long, logicalType timestamp-micros |
//! | timestamp without a time zone | long, logicalType local-timestamp-micros |
//! | struct | record (its fields as above) |
//! | list, large list | array of `["null", T]` (one block, then 0) |
//!
//! A null row (the struct itself null) is a null value (a tombstone). Any other type is an
//! error naming the field.
use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type, TimestampMicrosecondType,
    TimestampMillisecondType, TimestampNanosecondType, TimestampSecondType,
};
use arrow_array::{Array, ArrayRef, StructArray};
use arrow_schema::{DataType, TimeUnit};

use crate::varint::write_varlong;

/// Framed values of one struct column: Arrow binary layout (validity bitmap, i32 offsets,
/// data) and the null count.
pub struct Encoded {
    pub validity: Vec<u8>,
    pub offsets: Vec<u8>,
    pub data: Vec<u8>,
    pub nulls: usize,
}

/// The encoding the registered schema is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Avro,
    Json,
    Protobuf,
}

impl Format {
    pub fn parse(text: &str) -> Result<Format, String> {
        match text.to_ascii_lowercase().as_str() {
            "avro" => Ok(Format::Avro),
            "json" => Ok(Format::Json),
            "protobuf" => Ok(Format::Protobuf),
            other => Err(format!("schema type {other:?}: avro, json or protobuf")),
        }
    }
}

/// Encodes every row of `rows` with `schema_id` as Avro (see the module doc).
pub fn encode_rows(rows: &StructArray, schema_id: i32) -> Result<Encoded, String> {
    encode_rows_as(rows, schema_id, Format::Avro)
}

/// Encodes every row of `rows` with `schema_id` in `format`.
pub fn encode_rows_as(rows: &StructArray, schema_id: i32, format: Format) -> Result<Encoded, String> {
    let n = rows.len();
    for (f, c) in rows.fields().iter().zip(rows.columns()) {
        match format {
            Format::Avro => check(f.name(), c.data_type())?,
            Format::Json => crate::json_encode::check(f.name(), c.data_type())?,
            Format::Protobuf => crate::proto_encode::check(f.name(), c.data_type(), false)?,
        }
    }
    let mut out = Encoded {
        validity: vec![0; n.div_ceil(8)],
        offsets: Vec::with_capacity((n + 1) * 4),
        data: Vec::new(),
        nulls: 0,
    };
    out.offsets.extend_from_slice(&0i32.to_le_bytes());
    for row in 0..n {
        if rows.is_null(row) {
            out.nulls += 1;
        } else {
            out.validity[row / 8] |= 1 << (row % 8);
            out.data.push(0);
            out.data.extend_from_slice(&schema_id.to_be_bytes());
            match format {
                Format::Avro => {
                    for c in rows.columns() {
                        field(&mut out.data, c, row);
                    }
                }
                Format::Json => crate::json_encode::object(&mut out.data, rows.fields(), rows.columns(), row),
                Format::Protobuf => {
                    out.data.push(0); // message indexes [0]: the first message
                    crate::proto_encode::message(&mut out.data, rows.columns(), row);
                }
            }
        }
        let end =
            i32::try_from(out.data.len()).map_err(|_| "the encoded values pass 2 GiB in one batch".to_string())?;
        out.offsets.extend_from_slice(&end.to_le_bytes());
    }
    Ok(out)
}

/// The scalar types every registry encoder writes (Avro, JSON, Protobuf).
pub(crate) fn is_scalar(dt: &DataType) -> bool {
    matches!(
        dt,
        DataType::Boolean
            | DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::Float32
            | DataType::Float64
            | DataType::Utf8
            | DataType::LargeUtf8
            | DataType::Binary
            | DataType::LargeBinary
            | DataType::Date32
            | DataType::Timestamp(_, _)
    )
}

/// The types the encoder writes (checked once per batch, so `value` never meets another).
fn check(name: &str, dt: &DataType) -> Result<(), String> {
    match dt {
        dt if is_scalar(dt) => Ok(()),
        DataType::Struct(fields) => {
            fields.iter().try_for_each(|f| check(&format!("{name}.{}", f.name()), f.data_type()))
        }
        DataType::List(item) | DataType::LargeList(item) => check(&format!("{name}[]"), item.data_type()),
        other => Err(format!("field {name}: Avro encoding of {other} is not supported (registry sink)")),
    }
}

/// `["null", T]`: branch 0, or branch 1 and the value.
fn field(out: &mut Vec<u8>, a: &ArrayRef, row: usize) {
    if a.is_null(row) {
        write_varlong(out, 0);
    } else {
        write_varlong(out, 1);
        value(out, a, row);
    }
}

fn bytes(out: &mut Vec<u8>, b: &[u8]) {
    write_varlong(out, i64::try_from(b.len()).unwrap_or(i64::MAX));
    out.extend_from_slice(b);
}

/// A timestamp column's value in microseconds since the epoch, whatever its unit.
pub(crate) fn micros(a: &ArrayRef, unit: TimeUnit, row: usize) -> i64 {
    match unit {
        TimeUnit::Second => a.as_primitive::<TimestampSecondType>().value(row).saturating_mul(1_000_000),
        TimeUnit::Millisecond => a.as_primitive::<TimestampMillisecondType>().value(row).saturating_mul(1000),
        TimeUnit::Microsecond => a.as_primitive::<TimestampMicrosecondType>().value(row),
        TimeUnit::Nanosecond => a.as_primitive::<TimestampNanosecondType>().value(row) / 1000,
    }
}

fn value(out: &mut Vec<u8>, a: &ArrayRef, row: usize) {
    match a.data_type() {
        DataType::Boolean => out.push(u8::from(a.as_boolean().value(row))),
        DataType::Int8 => write_varlong(out, i64::from(a.as_primitive::<Int8Type>().value(row))),
        DataType::Int16 => write_varlong(out, i64::from(a.as_primitive::<Int16Type>().value(row))),
        DataType::Int32 => write_varlong(out, i64::from(a.as_primitive::<Int32Type>().value(row))),
        DataType::Int64 => write_varlong(out, a.as_primitive::<Int64Type>().value(row)),
        DataType::Float32 => out.extend_from_slice(&a.as_primitive::<Float32Type>().value(row).to_le_bytes()),
        DataType::Float64 => out.extend_from_slice(&a.as_primitive::<Float64Type>().value(row).to_le_bytes()),
        DataType::Utf8 => bytes(out, a.as_string::<i32>().value(row).as_bytes()),
        DataType::LargeUtf8 => bytes(out, a.as_string::<i64>().value(row).as_bytes()),
        DataType::Binary => bytes(out, a.as_binary::<i32>().value(row)),
        DataType::LargeBinary => bytes(out, a.as_binary::<i64>().value(row)),
        DataType::Date32 => write_varlong(out, i64::from(a.as_primitive::<Date32Type>().value(row))),
        DataType::Timestamp(unit, _) => write_varlong(out, micros(a, *unit, row)),
        DataType::Struct(_) => {
            for c in a.as_struct().columns() {
                field(out, c, row);
            }
        }
        DataType::List(_) => list(out, &a.as_list::<i32>().value(row)),
        DataType::LargeList(_) => list(out, &a.as_list::<i64>().value(row)),
        _ => unreachable!("checked by `check`"),
    }
}

/// An Avro array: one block of the items, then the empty block.
fn list(out: &mut Vec<u8>, items: &ArrayRef) {
    if !items.is_empty() {
        write_varlong(out, i64::try_from(items.len()).unwrap_or(i64::MAX));
        for i in 0..items.len() {
            field(out, items, i);
        }
    }
    write_varlong(out, 0);
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{Int32Array, ListArray, StringArray};
    use arrow_schema::Field;

    use super::*;
    use crate::avro_columns::{decode_avro_columns, Column, Kind, Program};

    /// Rows encoded here decode with the broker's Avro decoder into the same values.
    #[test]
    fn encoded_rows_decode_back() {
        let ids = Arc::new(Int32Array::from(vec![Some(7), None, Some(-300)])) as ArrayRef;
        let names = Arc::new(StringArray::from(vec![Some("a"), Some("bé"), None])) as ArrayRef;
        let tags = Arc::new(ListArray::from_iter_primitive::<Int32Type, _, _>(vec![
            Some(vec![Some(1), Some(2)]),
            Some(vec![]),
            None,
        ])) as ArrayRef;
        let rows = StructArray::from(vec![
            (Arc::new(Field::new("id", DataType::Int32, true)), ids),
            (Arc::new(Field::new("name", DataType::Utf8, true)), names),
            (Arc::new(Field::new("tags", tags.data_type().clone(), true)), tags),
        ]);
        let e = encode_rows(&rows, 9).unwrap();
        assert_eq!(e.nulls, 0);
        // the reader: struct<id int, name string, tags list<int>>
        let tree = vec![
            Column { kind: Kind::Struct, children: vec![1, 2, 3] },
            Column { kind: Kind::Int, children: vec![] },
            Column { kind: Kind::String, children: vec![] },
            Column { kind: Kind::List, children: vec![4] },
            Column { kind: Kind::Int, children: vec![] },
        ];
        let opt = |p: Program, t: usize| Program::Union { branches: vec![Program::Null { target: Some(t) }, p] };
        let program = Program::Record {
            target: Some(0),
            fields: vec![
                opt(Program::Int { target: Some(1) }, 1),
                opt(Program::Bytes { target: Some(2) }, 2),
                opt(Program::Array { target: Some(3), items: Box::new(opt(Program::Int { target: Some(4) }, 4)) }, 3),
            ],
            missing: vec![],
        };
        let c = decode_avro_columns(3, &e.validity, &e.offsets, &e.data, &tree, &[(9, program)]).unwrap();
        assert_eq!(c.failures, 0, "{:?}", c.first_failure);
        let id = |i: usize| i32::from_le_bytes(c.columns[1].values[i * 4..i * 4 + 4].try_into().unwrap());
        assert_eq!((id(0), id(2)), (7, -300));
        assert_eq!(c.columns[1].nulls, 1);
        assert_eq!(&c.columns[2].data, "abé".as_bytes());
        let items: Vec<i32> =
            c.columns[4].values.chunks_exact(4).map(|b| i32::from_le_bytes(b.try_into().unwrap())).collect();
        assert_eq!(items, vec![1, 2]);
        assert_eq!(c.columns[3].nulls, 1);
    }
}
