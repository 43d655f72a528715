//! Decoded records as an Arrow `RecordBatch` of the table's schema, moving the decoders'
//! buffers into Arrow arrays (no copy of keys, values or header bytes).
//!
//! Input: `columnar::Columns` (one stretch of a partition's log, read_committed) and, for
//! tables with value columns, `avro_columns::AvroColumns` with the reader tree it was
//! decoded into. The schema is the table's, as pyiceberg gives it to pyarrow (field ids in
//! `PARQUET:field_id`), and each top-level column is found by name:
//!
//! | column | from |
//! | --- | --- |
//! | `key` | the record key (binary) |
//! | `value` | the record value (binary), or the value struct decoded by schema |
//! | `topic`, `partition` | the same on every row |
//! | `offset`, `timestamp` (µs, the schema's time zone), `timestampType` | per record |
//! | `headers` | list<struct<key string, value binary>> |
//! | `value_schema_id`, `value_raw` | the value's schema id and, when it did not decode, its bytes |
//! | `key_struct`, `key_schema_id` | the key decoded by `<topic>-key`'s schemas, and its schema id |
//!
//! A header key that is not UTF-8 (Kafka's clients write strings, but the wire allows any
//! bytes) is kept with U+FFFD in place of the bad bytes rather than failing the commit.
use std::sync::Arc;

use arrow_array::{
    ArrayRef, BinaryArray, BooleanArray, Date32Array, Float32Array, Float64Array, Int32Array, Int64Array, ListArray,
    RecordBatch, StringArray, StructArray, TimestampMicrosecondArray,
};
use arrow_buffer::{BooleanBuffer, Buffer, NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType, SchemaRef, TimeUnit};

use crate::avro_columns::{AvroColumns, Built, Column};
use crate::columnar::{BinaryColumn, Columns};

/// One column's buffers, Arrow layout (see `avro_columns::Built`).
#[derive(Default)]
struct Parts {
    len: usize,
    nulls: usize,
    validity: Vec<u8>,
    values: Vec<u8>,
    offsets: Vec<u8>,
    data: Vec<u8>,
}

impl From<Built> for Parts {
    fn from(b: Built) -> Parts {
        Parts { len: b.len, nulls: b.nulls, validity: b.validity, values: b.values, offsets: b.offsets, data: b.data }
    }
}

impl From<BinaryColumn> for Parts {
    fn from(b: BinaryColumn) -> Parts {
        let len = (b.offsets.len() / 4).saturating_sub(1);
        Parts { len, nulls: b.nulls, validity: b.validity, values: Vec::new(), offsets: b.offsets, data: b.data }
    }
}

fn le<const N: usize, T>(bytes: &[u8], f: fn([u8; N]) -> T) -> Vec<T> {
    bytes.chunks_exact(N).map(|b| f(b.try_into().expect("chunks_exact gives N bytes"))).collect()
}

fn nulls(validity: Vec<u8>, len: usize, nulls: usize) -> Option<NullBuffer> {
    (nulls > 0).then(|| NullBuffer::new(BooleanBuffer::new(Buffer::from_vec(validity), 0, len)))
}

fn offsets(bytes: &[u8], len: usize) -> Result<OffsetBuffer<i32>, String> {
    let v = le(bytes, i32::from_le_bytes);
    if v.len() != len + 1 || v[0] < 0 || v.windows(2).any(|w| w[0] > w[1]) {
        return Err(format!("{} offsets for {len} rows, or not ascending", v.len()));
    }
    Ok(OffsetBuffer::new(ScalarBuffer::from(v)))
}

/// The array of type `dt` from `p` (children already built, for structs and lists).
fn array(dt: &DataType, p: Parts, children: Vec<ArrayRef>) -> Result<ArrayRef, String> {
    let n = p.len;
    let check = |got: usize| if got == n { Ok(()) } else { Err(format!("{got} values for {n} rows of {dt}")) };
    let fixed = |width: usize| check(p.values.len() / width);
    Ok(match dt {
        DataType::Binary => {
            let off = offsets(&p.offsets, n)?;
            let nb = nulls(p.validity, n, p.nulls);
            Arc::new(BinaryArray::try_new(off, Buffer::from_vec(p.data), nb).map_err(|e| e.to_string())?)
        }
        DataType::Utf8 => {
            let off = offsets(&p.offsets, n)?;
            let nb = nulls(p.validity, n, p.nulls);
            let data = Buffer::from_vec(p.data); // shared, not copied, by the clone below
            match StringArray::try_new(off.clone(), data.clone(), nb.clone()) {
                Ok(a) => Arc::new(a),
                Err(_) => Arc::new(lossy_strings(&off, data.as_slice(), nb)),
            }
        }
        DataType::Boolean => {
            if p.values.len() * 8 < n {
                return Err(format!("{} bits for {n} rows of {dt}", p.values.len() * 8));
            }
            let nb = nulls(p.validity, n, p.nulls);
            Arc::new(BooleanArray::new(BooleanBuffer::new(Buffer::from_vec(p.values), 0, n), nb))
        }
        DataType::Int32 | DataType::Date32 => {
            fixed(4)?;
            let v = ScalarBuffer::from(le(&p.values, i32::from_le_bytes));
            let nb = nulls(p.validity, n, p.nulls);
            if *dt == DataType::Date32 {
                Arc::new(Date32Array::new(v, nb))
            } else {
                Arc::new(Int32Array::new(v, nb))
            }
        }
        DataType::Int64 => {
            fixed(8)?;
            Arc::new(Int64Array::new(
                ScalarBuffer::from(le(&p.values, i64::from_le_bytes)),
                nulls(p.validity, n, p.nulls),
            ))
        }
        DataType::Timestamp(TimeUnit::Microsecond, tz) => {
            fixed(8)?;
            let v = ScalarBuffer::from(le(&p.values, i64::from_le_bytes));
            Arc::new(TimestampMicrosecondArray::new(v, nulls(p.validity, n, p.nulls)).with_timezone_opt(tz.clone()))
        }
        DataType::Float32 => {
            fixed(4)?;
            Arc::new(Float32Array::new(
                ScalarBuffer::from(le(&p.values, f32::from_le_bytes)),
                nulls(p.validity, n, p.nulls),
            ))
        }
        DataType::Float64 => {
            fixed(8)?;
            Arc::new(Float64Array::new(
                ScalarBuffer::from(le(&p.values, f64::from_le_bytes)),
                nulls(p.validity, n, p.nulls),
            ))
        }
        DataType::Struct(fields) => {
            let nb = nulls(p.validity, n, p.nulls);
            if children.iter().any(|c| c.len() != n) {
                return Err(format!("a struct of {n} rows has a child of another length ({dt})"));
            }
            Arc::new(StructArray::try_new(fields.clone(), children, nb).map_err(|e| e.to_string())?)
        }
        DataType::List(field) => {
            let off = offsets(&p.offsets, n)?;
            let child = children.into_iter().next().ok_or("a list without its element column")?;
            let nb = nulls(p.validity, n, p.nulls);
            Arc::new(ListArray::try_new(field.clone(), off, child, nb).map_err(|e| e.to_string())?)
        }
        other => return Err(format!("the table writer has no column of type {other}")),
    })
}

fn lossy_strings(off: &OffsetBuffer<i32>, data: &[u8], nb: Option<NullBuffer>) -> StringArray {
    let mut out = String::new();
    let mut ends = vec![0i32];
    for w in off.windows(2) {
        out.push_str(&String::from_utf8_lossy(&data[w[0] as usize..w[1] as usize]));
        ends.push(i32::try_from(out.len()).unwrap_or(i32::MAX));
    }
    StringArray::new(OffsetBuffer::new(ScalarBuffer::from(ends)), Buffer::from_vec(out.into_bytes()), nb)
}

/// Node `i` of the reader tree (pre-order, as `avro_columns` decoded it) as an array of `dt`.
fn value_array(dt: &DataType, tree: &[Column], i: usize, cols: &mut [Built]) -> Result<ArrayRef, String> {
    let node = tree.get(i).ok_or_else(|| format!("reader tree has no node {i}"))?;
    let children = match dt {
        DataType::Struct(fields) => {
            if fields.len() != node.children.len() {
                return Err(format!("{dt} has {} fields, the reader tree {}", fields.len(), node.children.len()));
            }
            fields
                .iter()
                .zip(&node.children)
                .map(|(f, &c)| value_array(f.data_type(), tree, c, cols))
                .collect::<Result<Vec<_>, _>>()?
        }
        DataType::List(field) => {
            let c = *node.children.first().ok_or("a list node without its element")?;
            vec![value_array(field.data_type(), tree, c, cols)?]
        }
        _ => Vec::new(),
    };
    let built = std::mem::take(cols.get_mut(i).ok_or_else(|| format!("no decoded column {i}"))?);
    array(dt, built.into(), children)
}

/// Registry-decoded values alone, as a batch of `schema`'s three columns in order: the
/// decoded struct (the tree's root), the schema id (int32, null when not framed) and the
/// raw bytes of a value that did not decode (binary) — the table's `value`,
/// `value_schema_id` and `value_raw`, for the Spark source (logbroker/spark/registry.py).
pub fn decoded_batch(schema: &SchemaRef, tree: &[Column], mut c: AvroColumns) -> Result<RecordBatch, String> {
    let f = schema.fields();
    if f.len() != 3 {
        return Err(format!("the decoded values' schema has {} columns, not 3 (struct, schema id, raw)", f.len()));
    }
    let value = value_array(f[0].data_type(), tree, 0, &mut c.columns)?;
    let ids = array(f[1].data_type(), std::mem::take(&mut c.schema_id).into(), Vec::new())?;
    let raw = array(f[2].data_type(), std::mem::take(&mut c.raw).into(), Vec::new())?;
    RecordBatch::try_new(Arc::clone(schema), vec![value, ids, raw]).map_err(|e| e.to_string())
}

/// The decoded values of one stretch of log, for a table with value columns.
pub struct DecodedValues<'a> {
    pub tree: &'a [Column],
    pub columns: AvroColumns,
}

/// The record batch of `schema` holding `c`'s records of `topic`-`partition`.
pub fn record_batch(
    schema: &SchemaRef,
    mut c: Columns,
    topic: &str,
    partition: i32,
    mut values: Option<DecodedValues<'_>>,
    mut keys: Option<DecodedValues<'_>>,
) -> Result<RecordBatch, String> {
    let n = c.count;
    let mut arrays: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
    for field in schema.fields() {
        let dt = field.data_type();
        let a: ArrayRef = match (field.name().as_str(), dt) {
            ("key", _) => array(dt, std::mem::take(&mut c.key).into(), Vec::new())?,
            ("value", DataType::Binary) => array(dt, std::mem::take(&mut c.value).into(), Vec::new())?,
            ("value", _) => {
                let v = values.as_mut().ok_or("the table has value columns and no values were decoded")?;
                value_array(dt, v.tree, 0, &mut v.columns.columns)?
            }
            ("topic", DataType::Utf8) => {
                let len = i32::try_from(topic.len()).map_err(|_| "topic name too long".to_string())?;
                let ends = (0..=n).map(|i| i32::try_from(i).map_or(i32::MAX, |i| i.saturating_mul(len)));
                Arc::new(StringArray::new(
                    OffsetBuffer::new(ends.collect::<ScalarBuffer<i32>>()),
                    Buffer::from_vec(topic.repeat(n).into_bytes()),
                    None,
                ))
            }
            ("partition", DataType::Int32) => Arc::new(Int32Array::from(vec![partition; n])),
            ("offset", _) => {
                array(dt, Parts { len: n, values: std::mem::take(&mut c.offset), ..Parts::default() }, vec![])?
            }
            ("timestamp", _) => {
                array(dt, Parts { len: n, values: std::mem::take(&mut c.timestamp_us), ..Parts::default() }, vec![])?
            }
            ("timestampType", _) => {
                array(dt, Parts { len: n, values: std::mem::take(&mut c.timestamp_type), ..Parts::default() }, vec![])?
            }
            ("headers", DataType::List(item)) => {
                let DataType::Struct(fields) = item.data_type() else {
                    return Err(format!("headers must be a list of structs, not {dt}"));
                };
                if fields.len() != 2 {
                    return Err(format!("headers must be list<struct<key, value>>, not {dt}"));
                }
                let keys = array(fields[0].data_type(), std::mem::take(&mut c.header_keys).into(), vec![])?;
                let vals = array(fields[1].data_type(), std::mem::take(&mut c.header_values).into(), vec![])?;
                let count = keys.len();
                let structs = array(item.data_type(), Parts { len: count, ..Parts::default() }, vec![keys, vals])?;
                let list = Parts { len: n, offsets: std::mem::take(&mut c.header_list_offsets), ..Parts::default() };
                array(dt, list, vec![structs])?
            }
            ("key_struct", _) => {
                let k = keys.as_mut().ok_or("the table has key columns and no keys were decoded")?;
                value_array(dt, k.tree, 0, &mut k.columns.columns)?
            }
            ("key_schema_id", _) => {
                let k = keys.as_mut().ok_or("the table has key columns and no keys were decoded")?;
                array(dt, std::mem::take(&mut k.columns.schema_id).into(), vec![])?
            }
            ("value_schema_id" | "value_raw", _) => {
                let v = values.as_mut().ok_or("the table has value columns and no values were decoded")?;
                let b = if field.name() == "value_raw" { &mut v.columns.raw } else { &mut v.columns.schema_id };
                array(dt, std::mem::take(b).into(), vec![])?
            }
            (name, _) => return Err(format!("the table's column {name} ({dt}) is not one the broker writes")),
        };
        if a.len() != n {
            return Err(format!("column {} has {} rows, the batch {n}", field.name(), a.len()));
        }
        arrays.push(a);
    }
    RecordBatch::try_new(Arc::clone(schema), arrays).map_err(|e| e.to_string())
}
