//! Arrow struct rows as JSON objects: the Spark sink's `value.schema.type=json` (framing in
//! registry_encode.rs; python/logbroker/spark/registry.py's `json_schema` is the JSON Schema it
//! registers, by the same rules). A row is an object with a member per field, in field order,
//! a null field `null`:
//!
//! | Arrow | JSON | JSON Schema |
//! | --- | --- | --- |
//! | boolean | true / false | boolean |
//! | int8 .. int64 | number | integer |
//! | float32, float64 | number (NaN and infinities `null`) | number |
//! | utf8, large utf8 | string | string |
//! | binary, large binary | base64 string | string, contentEncoding base64 |
//! | date32 | `"YYYY-MM-DD"` | string, format date |
//! | timestamp (with a zone) | `"YYYY-MM-DDTHH:MM:SS.ffffffZ"` (UTC) | string, format date-time |
//! | timestamp without a zone | the same without `Z` | string |
//! | struct | object | object |
//! | list, large list | array | array |
use std::io::Write as _;

use arrow_array::cast::AsArray;
use arrow_array::types::{Date32Type, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type};
use arrow_array::{Array, ArrayRef};
use arrow_schema::{DataType, Fields};
use base64::Engine as _;

use crate::calendar::ymd;

/// The types the encoder writes (checked once per batch).
pub fn check(name: &str, dt: &DataType) -> Result<(), String> {
    match dt {
        dt if crate::registry_types::is_scalar(dt) => Ok(()),
        DataType::Struct(fields) => {
            fields.iter().try_for_each(|f| check(&format!("{name}.{}", f.name()), f.data_type()))
        }
        DataType::List(item) | DataType::LargeList(item) => check(&format!("{name}[]"), item.data_type()),
        other => Err(format!("field {name}: JSON encoding of {other} is not supported (registry sink)")),
    }
}

/// Writes row `row` of the struct with `fields` and `columns` as a JSON object.
pub fn object(out: &mut Vec<u8>, fields: &Fields, columns: &[ArrayRef], row: usize) {
    out.push(b'{');
    for (i, (f, c)) in fields.iter().zip(columns).enumerate() {
        if i > 0 {
            out.push(b',');
        }
        string(out, f.name());
        out.push(b':');
        value(out, c, row);
    }
    out.push(b'}');
}

fn string(out: &mut Vec<u8>, s: &str) {
    serde_json::to_writer(&mut *out, s).expect("writing to a Vec does not fail");
}

fn number(out: &mut Vec<u8>, v: impl std::fmt::Display) {
    let _ = write!(out, "{v}");
}

fn float(out: &mut Vec<u8>, v: f64) {
    serde_json::to_writer(&mut *out, &v).expect("writing to a Vec does not fail");
    // non-finite: null
}

fn value(out: &mut Vec<u8>, a: &ArrayRef, row: usize) {
    if a.is_null(row) {
        out.extend_from_slice(b"null");
        return;
    }
    match a.data_type() {
        DataType::Boolean => out.extend_from_slice(if a.as_boolean().value(row) { b"true" } else { b"false" }),
        DataType::Int8 => number(out, a.as_primitive::<Int8Type>().value(row)),
        DataType::Int16 => number(out, a.as_primitive::<Int16Type>().value(row)),
        DataType::Int32 => number(out, a.as_primitive::<Int32Type>().value(row)),
        DataType::Int64 => number(out, a.as_primitive::<Int64Type>().value(row)),
        DataType::Float32 => float(out, f64::from(a.as_primitive::<Float32Type>().value(row))),
        DataType::Float64 => float(out, a.as_primitive::<Float64Type>().value(row)),
        DataType::Utf8 => string(out, a.as_string::<i32>().value(row)),
        DataType::LargeUtf8 => string(out, a.as_string::<i64>().value(row)),
        DataType::Binary => base64_string(out, a.as_binary::<i32>().value(row)),
        DataType::LargeBinary => base64_string(out, a.as_binary::<i64>().value(row)),
        DataType::Date32 => {
            let _ = write!(out, "\"{}\"", ymd(i64::from(a.as_primitive::<Date32Type>().value(row))));
        }
        DataType::Timestamp(unit, zone) => {
            let us = crate::registry_types::micros(a, *unit, row);
            let secs = us.div_euclid(1_000_000);
            let in_day = secs.rem_euclid(86_400);
            let _ = write!(
                out,
                "\"{}T{:02}:{:02}:{:02}.{:06}{}\"",
                ymd(secs.div_euclid(86_400)),
                in_day / 3600,
                in_day / 60 % 60,
                in_day % 60,
                us.rem_euclid(1_000_000),
                if zone.is_some() { "Z" } else { "" }
            );
        }
        DataType::Struct(fields) => {
            let s = a.as_struct();
            object(out, fields, s.columns(), row);
        }
        DataType::List(_) => array(out, &a.as_list::<i32>().value(row)),
        DataType::LargeList(_) => array(out, &a.as_list::<i64>().value(row)),
        _ => unreachable!("checked by `check`"),
    }
}

fn base64_string(out: &mut Vec<u8>, b: &[u8]) {
    out.push(b'"');
    out.extend_from_slice(base64::engine::general_purpose::STANDARD.encode(b).as_bytes());
    out.push(b'"');
}

fn array(out: &mut Vec<u8>, items: &ArrayRef) {
    out.push(b'[');
    for i in 0..items.len() {
        if i > 0 {
            out.push(b',');
        }
        value(out, items, i);
    }
    out.push(b']');
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{
        BinaryArray, Float64Array, Int32Array, ListArray, StringArray, StructArray, TimestampMicrosecondArray,
    };
    use arrow_schema::Field;

    use super::*;

    #[test]
    fn rows_are_json_objects_that_parse_back() {
        let ts = Arc::new(TimestampMicrosecondArray::from(vec![Some(1_510_871_468_000_001), None]).with_timezone("UTC"))
            as ArrayRef;
        let tags =
            Arc::new(ListArray::from_iter_primitive::<Int32Type, _, _>(vec![Some(vec![Some(1), None]), Some(vec![])]))
                as ArrayRef;
        let column = |name: &str, a: ArrayRef| (Arc::new(Field::new(name, a.data_type().clone(), true)), a);
        let rows = StructArray::from(vec![
            column("id", Arc::new(Int32Array::from(vec![Some(-7), None]))),
            column("name", Arc::new(StringArray::from(vec![Some("a \"q\" é"), Some("b")]))),
            column("blob", Arc::new(BinaryArray::from_opt_vec(vec![Some(b"\x00\xff"), None]))),
            column("at", ts),
            column("x", Arc::new(Float64Array::from(vec![f64::NAN, 0.5]))),
            column("tags", tags),
        ]);
        let mut out = Vec::new();
        object(&mut out, rows.fields(), rows.columns(), 0);
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        let want = serde_json::json!({"id": -7, "name": "a \"q\" é", "blob": "AP8=",
            "at": "2017-11-16T22:31:08.000001Z", "x": null, "tags": [1, null]});
        assert_eq!(v, want);
        out.clear();
        object(&mut out, rows.fields(), rows.columns(), 1);
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v, serde_json::json!({"id": null, "name": "b", "blob": null, "at": null, "x": 0.5, "tags": []}));
    }
}
