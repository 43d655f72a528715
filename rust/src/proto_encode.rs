//! Arrow struct rows as Protobuf messages: the Spark sink's `value.schema.type=protobuf`
//! (framing, with the message indexes `[0]`, in registry_encode.rs; python/logbroker/spark/
//! registry.py's `proto_schema` is the proto3 file it registers, by the same rules). The
//! struct's fields are the message's fields 1, 2, ... in order; a null field is absent
//! (scalars are `optional`, so a reader tells absent from zero):
//!
//! | Arrow | proto3 | wire |
//! | --- | --- | --- |
//! | boolean | bool | varint |
//! | int8, int16, int32 | int32 | varint (a negative one sign-extended to ten bytes) |
//! | int64 | int64 | varint |
//! | float32, float64 | float, double | fixed32, fixed64 |
//! | utf8, binary (and large) | string, bytes | length-delimited |
//! | date32 | int32 (days since 1970-01-01) | varint |
//! | timestamp | google.protobuf.Timestamp (seconds, nanos) | a message |
//! | struct | a nested message | a message |
//! | list | `repeated` (numbers packed) | |
//!
//! A list of lists has no proto3 form and is refused; a null item of a list is written as
//! its type's default (zero, empty, an empty message), since a repeated field has no nulls.
use arrow_array::cast::AsArray;
use arrow_array::types::{Date32Type, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type};
use arrow_array::{Array, ArrayRef};
use arrow_schema::DataType;

const VARINT: u64 = 0;
const FIXED64: u64 = 1;
const LEN: u64 = 2;
const FIXED32: u64 = 5;

/// The types the encoder writes (checked once per batch); `in_list`: an item of a list.
pub fn check(name: &str, dt: &DataType, in_list: bool) -> Result<(), String> {
    match dt {
        dt if crate::registry_types::is_scalar(dt) => Ok(()),
        DataType::Struct(fields) => {
            fields.iter().try_for_each(|f| check(&format!("{name}.{}", f.name()), f.data_type(), false))
        }
        DataType::List(_) | DataType::LargeList(_) if in_list => {
            Err(format!("field {name}: a list of lists has no Protobuf form (registry sink)"))
        }
        DataType::List(item) | DataType::LargeList(item) => check(&format!("{name}[]"), item.data_type(), true),
        other => Err(format!("field {name}: Protobuf encoding of {other} is not supported (registry sink)")),
    }
}

/// Writes row `row` of a struct's `columns` as a message's fields.
pub fn message(out: &mut Vec<u8>, columns: &[ArrayRef], row: usize) {
    for (i, c) in columns.iter().enumerate() {
        if !c.is_null(row) {
            field(out, i as u64 + 1, c, row);
        }
    }
}

fn uvarint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn tag(out: &mut Vec<u8>, number: u64, wire: u64) {
    uvarint(out, (number << 3) | wire);
}

/// A length-delimited field whose body `body` writes.
fn delimited(out: &mut Vec<u8>, number: u64, body: impl FnOnce(&mut Vec<u8>)) {
    let mut inner = Vec::new();
    body(&mut inner);
    tag(out, number, LEN);
    uvarint(out, inner.len() as u64);
    out.extend_from_slice(&inner);
}

/// The varint of a number column's row, as int32/int64/bool/date encode it (None: not such a column).
fn varint_of(a: &ArrayRef, row: usize) -> Option<u64> {
    let signed = |v: i64| v as u64; // two's complement: a negative int32 is ten bytes, as proto writes it
    Some(match a.data_type() {
        DataType::Boolean => u64::from(a.as_boolean().value(row)),
        DataType::Int8 => signed(i64::from(a.as_primitive::<Int8Type>().value(row))),
        DataType::Int16 => signed(i64::from(a.as_primitive::<Int16Type>().value(row))),
        DataType::Int32 => signed(i64::from(a.as_primitive::<Int32Type>().value(row))),
        DataType::Int64 => signed(a.as_primitive::<Int64Type>().value(row)),
        DataType::Date32 => signed(i64::from(a.as_primitive::<Date32Type>().value(row))),
        _ => return None,
    })
}

fn field(out: &mut Vec<u8>, number: u64, a: &ArrayRef, row: usize) {
    if let Some(v) = varint_of(a, row) {
        tag(out, number, VARINT);
        uvarint(out, v);
        return;
    }
    match a.data_type() {
        DataType::Float32 => {
            tag(out, number, FIXED32);
            out.extend_from_slice(&a.as_primitive::<Float32Type>().value(row).to_le_bytes());
        }
        DataType::Float64 => {
            tag(out, number, FIXED64);
            out.extend_from_slice(&a.as_primitive::<Float64Type>().value(row).to_le_bytes());
        }
        DataType::Utf8 => bytes(out, number, a.as_string::<i32>().value(row).as_bytes()),
        DataType::LargeUtf8 => bytes(out, number, a.as_string::<i64>().value(row).as_bytes()),
        DataType::Binary => bytes(out, number, a.as_binary::<i32>().value(row)),
        DataType::LargeBinary => bytes(out, number, a.as_binary::<i64>().value(row)),
        DataType::Timestamp(unit, _) => {
            let us = crate::registry_types::micros(a, *unit, row);
            delimited(out, number, |m| {
                let (secs, nanos) = (us.div_euclid(1_000_000), us.rem_euclid(1_000_000) * 1000);
                if secs != 0 {
                    tag(m, 1, VARINT);
                    uvarint(m, secs as u64);
                }
                if nanos != 0 {
                    tag(m, 2, VARINT);
                    uvarint(m, nanos as u64);
                }
            });
        }
        DataType::Struct(_) => delimited(out, number, |m| message(m, a.as_struct().columns(), row)),
        DataType::List(_) => repeated(out, number, &a.as_list::<i32>().value(row)),
        DataType::LargeList(_) => repeated(out, number, &a.as_list::<i64>().value(row)),
        _ => unreachable!("checked by `check`"),
    }
}

fn bytes(out: &mut Vec<u8>, number: u64, b: &[u8]) {
    tag(out, number, LEN);
    uvarint(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// A repeated field: numbers packed in one length-delimited field, the others one field per item.
fn repeated(out: &mut Vec<u8>, number: u64, items: &ArrayRef) {
    if items.is_empty() {
        return;
    }
    let fixed = match items.data_type() {
        DataType::Float32 => Some(4),
        DataType::Float64 => Some(8),
        _ => None,
    };
    if varint_of(items, 0).is_some() || fixed.is_some() {
        delimited(out, number, |m| {
            for i in 0..items.len() {
                match items.data_type() {
                    DataType::Float32 => {
                        let v = if items.is_null(i) { 0.0 } else { items.as_primitive::<Float32Type>().value(i) };
                        m.extend_from_slice(&v.to_le_bytes());
                    }
                    DataType::Float64 => {
                        let v = if items.is_null(i) { 0.0 } else { items.as_primitive::<Float64Type>().value(i) };
                        m.extend_from_slice(&v.to_le_bytes());
                    }
                    _ => uvarint(m, if items.is_null(i) { 0 } else { varint_of(items, i).unwrap_or(0) }),
                }
            }
        });
        return;
    }
    for i in 0..items.len() {
        if items.is_null(i) {
            tag(out, number, LEN);
            uvarint(out, 0); // the default: an empty string, bytes or message
        } else {
            field(out, number, items, i);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{Int32Array, ListArray, StringArray, StructArray};
    use arrow_schema::Field;

    use super::*;

    /// Bytes a protobuf implementation writes for `message M { optional int32 id = 1;
    /// optional string name = 2; repeated int32 tags = 3; }`.
    #[test]
    fn fields_are_protobufs_wire_form() {
        let tags = Arc::new(ListArray::from_iter_primitive::<Int32Type, _, _>(vec![
            Some(vec![Some(1), Some(300)]),
            Some(vec![]),
        ])) as ArrayRef;
        let rows = StructArray::from(vec![
            (
                Arc::new(Field::new("id", DataType::Int32, true)),
                Arc::new(Int32Array::from(vec![Some(-1), None])) as ArrayRef,
            ),
            (
                Arc::new(Field::new("name", DataType::Utf8, true)),
                Arc::new(StringArray::from(vec![Some("hi"), Some("")])) as ArrayRef,
            ),
            (Arc::new(Field::new("tags", tags.data_type().clone(), true)), tags),
        ]);
        let mut out = Vec::new();
        message(&mut out, rows.columns(), 0);
        let mut want = vec![0x08];
        want.extend([0xff; 9]);
        want.push(0x01); // -1 as ten bytes
        want.extend([0x12, 2, b'h', b'i']);
        want.extend([0x1a, 3, 1, 0xac, 0x02]); // packed 1, 300
        assert_eq!(out, want);
        out.clear();
        message(&mut out, rows.columns(), 1);
        assert_eq!(out, vec![0x12, 0], "an empty string is present, an empty list and a null absent");
        assert!(check("v", &DataType::List(Arc::new(Field::new("i", rows.data_type().clone(), true))), false).is_ok());
        let nested = DataType::List(Arc::new(Field::new(
            "i",
            DataType::List(Arc::new(Field::new("j", DataType::Int32, true))),
            true,
        )));
        assert!(check("v", &nested, false).unwrap_err().contains("list of lists"));
    }
}
