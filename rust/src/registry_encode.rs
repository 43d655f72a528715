//! Arrow struct rows to Confluent-framed values: what the Spark sink writes with
//! `value.format=registry` (python/logbroker/spark/registry.py generates the writer schema
//! from the same Arrow type, by the same rules, and registers it for the schema id).
//!
//! Each value is a magic byte 0, the schema id (4 bytes, big-endian), for Protobuf the
//! message indexes (one 0 byte: the schema's first message), then the row in the schema's
//! format: Avro (avro_encode.rs), JSON (json_encode.rs) or Protobuf (proto_encode.rs). A null
//! row (the struct itself null) is a null value (a tombstone). A type the format does not
//! write is an error naming the field, before any row is encoded.
use arrow_array::{Array, StructArray};

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

/// Encodes every row of `rows` with `schema_id` as Avro.
pub fn encode_rows(rows: &StructArray, schema_id: i32) -> Result<Encoded, String> {
    encode_rows_as(rows, schema_id, Format::Avro)
}

/// Encodes every row of `rows` with `schema_id` in `format`.
pub fn encode_rows_as(rows: &StructArray, schema_id: i32, format: Format) -> Result<Encoded, String> {
    let n = rows.len();
    for (f, c) in rows.fields().iter().zip(rows.columns()) {
        match format {
            Format::Avro => crate::avro_encode::check(f.name(), c.data_type())?,
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
                Format::Avro => crate::avro_encode::record(&mut out.data, rows.columns(), row),
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{Int32Array, ListArray, StringArray};
    use arrow_schema::Field;

    use super::*;
    use crate::avro_columns::{decode_avro_columns, Column, Kind, Program};
    use arrow_array::types::Int32Type;
    use arrow_array::ArrayRef;
    use arrow_schema::DataType;

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
