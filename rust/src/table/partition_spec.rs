//! The table's partition spec as the writer applies it: each field a transform of a source
//! column (Iceberg's, https://iceberg.apache.org/spec/#partition-transforms), evaluated per
//! row of a decoded stretch to give the row's partition key, the tuple of its fields' values.
//!
//! | transform | source types | value |
//! | --- | --- | --- |
//! | `identity` | int, long, date, timestamp, string, binary | the value (a timestamp's microseconds) |
//! | `year`, `month`, `day`, `hour` | date, timestamp | years, months, days, hours since 1970-01-01 (floor) |
//! | `bucket[N]` | int, long, date, timestamp, string, binary | `(murmur3_x86_32(bytes) & i32::MAX) % N` |
//! | `truncate[W]` | int, long, string, binary | `v - v mod W`; the first W characters or bytes |
//! | `void` | any | null |
//!
//! Hash bytes are the spec's: an int, long, date or timestamp as the 8-byte little-endian
//! long, a string's UTF-8, a binary's bytes. A source column is a top-level column (`partition`,
//! `timestamp`, `key`, ...) or a field of a struct column (`value.id`); a row whose struct is
//! null has a null there. Paths below the data location follow Iceberg's human form
//! (`timestamp_day=2026-11-30/value_id_bucket=3`).
use std::fmt::Write as _;

use arrow_array::cast::AsArray;
use arrow_array::types::{Date32Type, Int32Type, Int64Type, TimestampMicrosecondType};
use arrow_array::{Array, ArrayRef, RecordBatch, StructArray};
use arrow_schema::{DataType, TimeUnit};

use crate::calendar::{civil, ymd};

/// One field's transform.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transform {
    Identity,
    Year,
    Month,
    Day,
    Hour,
    Bucket(u32),
    Truncate(u32),
    Void,
}

impl Transform {
    /// From Iceberg's text form: `identity`, `day`, `bucket[16]`, `truncate[4]`, ...
    pub fn parse(text: &str) -> Result<Transform, String> {
        let param = |name: &str| -> Result<Option<u32>, String> {
            match text.strip_prefix(name).and_then(|r| r.strip_prefix('[')).and_then(|r| r.strip_suffix(']')) {
                Some(n) => match n.trim().parse::<u32>() {
                    Ok(n) if n > 0 => Ok(Some(n)),
                    _ => Err(format!("transform {text:?}: its width must be a positive integer")),
                },
                None => Ok(None),
            }
        };
        Ok(match text {
            "identity" => Transform::Identity,
            "year" => Transform::Year,
            "month" => Transform::Month,
            "day" => Transform::Day,
            "hour" => Transform::Hour,
            "void" => Transform::Void,
            _ => {
                if let Some(n) = param("bucket")? {
                    Transform::Bucket(n)
                } else if let Some(w) = param("truncate")? {
                    Transform::Truncate(w)
                } else {
                    return Err(format!(
                        "transform {text:?}: the broker writes identity, year, month, day, hour, bucket[N], truncate[W] and void"
                    ));
                }
            }
        })
    }
}

/// One partition field: `transform(source)` named `name`.
#[derive(Debug, Clone)]
pub struct SpecField {
    /// The source column's path from the top level (`["value", "id"]`).
    pub source: Vec<String>,
    pub transform: Transform,
    pub name: String,
}

/// A partition field's value for a row.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PartitionValue {
    Null,
    Int(i64),
    Str(String),
    Bytes(Vec<u8>),
}

/// A row's partition: one value per spec field.
pub type PartitionKey = Vec<PartitionValue>;

/// The fields of the table's current spec (empty: unpartitioned).
#[derive(Debug, Clone)]
pub struct PartitionSpec {
    pub fields: Vec<SpecField>,
}

const MICROS_PER_HOUR: i64 = 3_600_000_000;
const MICROS_PER_DAY: i64 = 86_400_000_000;

impl PartitionSpec {
    /// What an Iceberg topic's table has unless `iceberg.partition.spec` says otherwise.
    pub fn day_of_timestamp() -> PartitionSpec {
        PartitionSpec {
            fields: vec![SpecField {
                source: vec!["timestamp".into()],
                transform: Transform::Day,
                name: "timestamp_day".into(),
            }],
        }
    }

    /// Whether this is exactly `day(timestamp)` (what upsert tables' delete files assume).
    pub fn is_day_of_timestamp(&self) -> bool {
        matches!(&self.fields[..], [f] if f.transform == Transform::Day && f.source == ["timestamp"])
    }

    /// Each row's partition key, as runs `(key, first row, rows)` in row order (adjacent
    /// rows of one key are one run: a topic's timestamps mostly rise, so day runs are long).
    pub fn runs(&self, batch: &RecordBatch) -> Result<Vec<(PartitionKey, usize, usize)>, String> {
        let n = batch.num_rows();
        let sources = self.fields.iter().map(|f| Source::find(batch, f)).collect::<Result<Vec<_>, _>>()?;
        let mut runs: Vec<(PartitionKey, usize, usize)> = Vec::new();
        let mut key: PartitionKey = Vec::with_capacity(sources.len());
        for row in 0..n {
            key.clear();
            for s in &sources {
                key.push(s.value(row));
            }
            match runs.last_mut() {
                Some((k, _, len)) if *k == key => *len += 1,
                _ => runs.push((key.clone(), row, 1)),
            }
        }
        Ok(runs)
    }

    /// The directory of a partition below the data location: `name=value/...`.
    pub fn path(&self, key: &PartitionKey) -> String {
        let mut out = String::new();
        for (f, v) in self.fields.iter().zip(key) {
            if !out.is_empty() {
                out.push('/');
            }
            out.push_str(&escape(&f.name));
            out.push('=');
            out.push_str(&escape(&human(f.transform, v)));
        }
        out
    }
}

/// A source column's arrays from the top level down to the leaf, and how to read its rows.
struct Source<'a> {
    levels: Vec<&'a ArrayRef>,
    leaf: &'a ArrayRef,
    transform: Transform,
}

impl<'a> Source<'a> {
    fn find(batch: &'a RecordBatch, f: &SpecField) -> Result<Source<'a>, String> {
        let name = f.source.join(".");
        let missing = || format!("partition field {}: the table has no column {name}", f.name);
        let (first, rest) = f.source.split_first().ok_or_else(missing)?;
        let mut at: &ArrayRef = batch.column_by_name(first).ok_or_else(missing)?;
        let mut levels = Vec::new();
        for part in rest {
            let s: &StructArray = at.as_struct_opt().ok_or_else(missing)?;
            levels.push(at);
            at = s.column_by_name(part).ok_or_else(missing)?;
        }
        let ok = match (f.transform, at.data_type()) {
            (Transform::Void, _)
            | (Transform::Year | Transform::Month | Transform::Day, DataType::Date32)
            | (
                Transform::Year | Transform::Month | Transform::Day | Transform::Hour,
                DataType::Timestamp(TimeUnit::Microsecond, _),
            ) => true,
            (Transform::Identity | Transform::Bucket(_), dt) => matches!(
                dt,
                DataType::Int32
                    | DataType::Int64
                    | DataType::Date32
                    | DataType::Timestamp(TimeUnit::Microsecond, _)
                    | DataType::Utf8
                    | DataType::Binary
            ),
            (Transform::Truncate(_), dt) => {
                matches!(dt, DataType::Int32 | DataType::Int64 | DataType::Utf8 | DataType::Binary)
            }
            _ => false,
        };
        if !ok {
            return Err(format!(
                "partition field {}: {:?} does not apply to column {name} of type {}",
                f.name,
                f.transform,
                at.data_type()
            ));
        }
        Ok(Source { levels, leaf: at, transform: f.transform })
    }

    fn value(&self, row: usize) -> PartitionValue {
        if self.transform == Transform::Void || self.levels.iter().any(|a| a.is_null(row)) || self.leaf.is_null(row) {
            return PartitionValue::Null;
        }
        let a = self.leaf;
        match a.data_type() {
            DataType::Int32 => long(self.transform, i64::from(a.as_primitive::<Int32Type>().value(row))),
            DataType::Int64 => long(self.transform, a.as_primitive::<Int64Type>().value(row)),
            DataType::Date32 => {
                let days = i64::from(a.as_primitive::<Date32Type>().value(row));
                match self.transform {
                    Transform::Year | Transform::Month | Transform::Day => {
                        PartitionValue::Int(time_unit(self.transform, days * MICROS_PER_DAY))
                    }
                    t => long(t, days),
                }
            }
            DataType::Timestamp(..) => {
                let us = a.as_primitive::<TimestampMicrosecondType>().value(row);
                match self.transform {
                    t @ (Transform::Year | Transform::Month | Transform::Day | Transform::Hour) => {
                        PartitionValue::Int(time_unit(t, us))
                    }
                    t => long(t, us),
                }
            }
            DataType::Utf8 => {
                let s = a.as_string::<i32>().value(row);
                match self.transform {
                    Transform::Bucket(n) => PartitionValue::Int(bucket(s.as_bytes(), n)),
                    Transform::Truncate(w) => PartitionValue::Str(s.chars().take(w as usize).collect()),
                    _ => PartitionValue::Str(s.to_owned()),
                }
            }
            DataType::Binary => {
                let b = a.as_binary::<i32>().value(row);
                match self.transform {
                    Transform::Bucket(n) => PartitionValue::Int(bucket(b, n)),
                    Transform::Truncate(w) => PartitionValue::Bytes(b[..b.len().min(w as usize)].to_vec()),
                    _ => PartitionValue::Bytes(b.to_vec()),
                }
            }
            _ => PartitionValue::Null, // refused by `find`
        }
    }
}

fn long(t: Transform, v: i64) -> PartitionValue {
    PartitionValue::Int(match t {
        Transform::Bucket(n) => bucket(&v.to_le_bytes(), n),
        Transform::Truncate(w) => v - v.rem_euclid(i64::from(w)),
        _ => v,
    })
}

/// Years, months, days or hours since 1970-01-01T00:00Z of `us` microseconds (floor).
fn time_unit(t: Transform, us: i64) -> i64 {
    match t {
        Transform::Hour => us.div_euclid(MICROS_PER_HOUR),
        Transform::Day => us.div_euclid(MICROS_PER_DAY),
        Transform::Month | Transform::Year => {
            let (y, m, _) = civil(us.div_euclid(MICROS_PER_DAY));
            if t == Transform::Year {
                y - 1970
            } else {
                (y - 1970) * 12 + (m - 1)
            }
        }
        _ => us,
    }
}

/// Iceberg's bucket of hash bytes.
pub fn bucket(bytes: &[u8], n: u32) -> i64 {
    i64::from((murmur3_x86_32(bytes, 0) & 0x7FFF_FFFF) % n)
}

/// MurmurHash3 x86 32-bit (what Iceberg's bucket transform hashes with, seed 0).
pub fn murmur3_x86_32(data: &[u8], seed: u32) -> u32 {
    const C1: u32 = 0xcc9e_2d51;
    const C2: u32 = 0x1b87_3593;
    let mut h = seed;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(C1).rotate_left(15).wrapping_mul(C2);
        h ^= k;
        h = h.rotate_left(13).wrapping_mul(5).wrapping_add(0xe654_6b64);
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        let mut k = 0u32;
        for (i, b) in tail.iter().enumerate() {
            k |= u32::from(*b) << (8 * i);
        }
        h ^= k.wrapping_mul(C1).rotate_left(15).wrapping_mul(C2);
    }
    h ^= data.len() as u32;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

/// A partition value in Iceberg's human form, as paths show it.
fn human(transform: Transform, value: &PartitionValue) -> String {
    match (transform, value) {
        (_, PartitionValue::Null) => "null".into(),
        (Transform::Year, PartitionValue::Int(years)) => format!("{:04}", 1970 + years),
        (Transform::Month, PartitionValue::Int(months)) => {
            format!("{:04}-{:02}", 1970 + months.div_euclid(12), months.rem_euclid(12) + 1)
        }
        (Transform::Day, PartitionValue::Int(days)) => ymd(*days),
        (Transform::Hour, PartitionValue::Int(hours)) => {
            format!("{}-{:02}", ymd(hours.div_euclid(24)), hours.rem_euclid(24))
        }
        (_, PartitionValue::Int(i)) => i.to_string(),
        (_, PartitionValue::Str(text)) => text.clone(),
        (_, PartitionValue::Bytes(bytes)) => bytes.iter().fold(String::with_capacity(bytes.len() * 2), |mut out, x| {
            let _ = write!(out, "{x:02x}");
            out
        }),
    }
}

/// Percent-encodes what is not safe in a path segment.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.') {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Iceberg spec's appendix B hash values.
    #[test]
    fn bucket_hashes_are_the_specs() {
        assert_eq!(murmur3_x86_32(&34i64.to_le_bytes(), 0) as i32, 2_017_239_379); // int and long 34
        assert_eq!(murmur3_x86_32(b"iceberg", 0) as i32, 1_210_000_089);
        assert_eq!(murmur3_x86_32(&[0, 1, 2, 3], 0) as i32, -188_683_207);
        assert_eq!(murmur3_x86_32(&17_486i64.to_le_bytes(), 0) as i32, -653_330_422); // date 2017-11-16
                                                                                      // timestamp 2017-11-16T22:31:08 (microseconds)
        assert_eq!(murmur3_x86_32(&1_510_871_468_000_000i64.to_le_bytes(), 0) as i32, -2_047_944_441);
        assert_eq!(bucket(b"iceberg", 16), i64::from(1_210_000_089 % 16));
    }

    #[test]
    fn time_transforms_floor_and_read_as_iceberg_writes_them() {
        let us = 1_510_871_468_000_000; // 2017-11-16T22:31:08Z
        assert_eq!(time_unit(Transform::Year, us), 47);
        assert_eq!(time_unit(Transform::Month, us), 47 * 12 + 10);
        assert_eq!(time_unit(Transform::Day, us), 17_486);
        assert_eq!(time_unit(Transform::Hour, us), 17_486 * 24 + 22);
        assert_eq!(time_unit(Transform::Day, -1), -1);
        assert_eq!(time_unit(Transform::Month, -1), -1, "1969-12");
        assert_eq!(human(Transform::Month, &PartitionValue::Int(-1)), "1969-12");
        assert_eq!(human(Transform::Hour, &PartitionValue::Int(17_486 * 24 + 22)), "2017-11-16-22");
        assert_eq!(human(Transform::Day, &PartitionValue::Int(17_486)), "2017-11-16");
        assert_eq!(long(Transform::Truncate(10), -1), PartitionValue::Int(-10));
        assert_eq!(Transform::parse("bucket[16]").unwrap(), Transform::Bucket(16));
        assert!(Transform::parse("bucket[0]").is_err() && Transform::parse("zorder").is_err());
    }
}
