//! Arrow struct rows as Avro records, the Spark sink's default `value.schema.type` (framed
//! by registry_encode.rs). The row is the binary encoding of a record of the struct's fields,
//! every field `["null", T]` (branch 0 null, branch 1 the value):
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
use arrow_array::cast::AsArray;
use arrow_array::types::{Date32Type, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type};
use arrow_array::{Array, ArrayRef};
use arrow_schema::DataType;

use crate::registry_types::{is_scalar, micros};
use crate::varint::write_varlong;

/// The types the encoder writes (checked once per batch, so `value` never meets another).
pub fn check(name: &str, dt: &DataType) -> Result<(), String> {
    match dt {
        dt if is_scalar(dt) => Ok(()),
        DataType::Struct(fields) => {
            fields.iter().try_for_each(|f| check(&format!("{name}.{}", f.name()), f.data_type()))
        }
        DataType::List(item) | DataType::LargeList(item) => check(&format!("{name}[]"), item.data_type()),
        other => Err(format!("field {name}: Avro encoding of {other} is not supported (registry sink)")),
    }
}

/// One row of a struct's `columns` as the record's fields.
pub fn record(out: &mut Vec<u8>, columns: &[ArrayRef], row: usize) {
    for c in columns {
        field(out, c, row);
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
