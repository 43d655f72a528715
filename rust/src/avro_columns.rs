//! Avro record values (Confluent's framing) decoded into Arrow-layout columns, for Iceberg
//! topics whose table has the value schema's columns (python/logbroker/iceberg/value_schema.py).
//! JSON Schema and Protobuf values go through the same rows and columns with programs of
//! their own (`Program::JsonObject` and the like, rust/src/json_columns.rs;
//! `Program::ProtoMessage`, rust/src/proto_columns.rs).
//!
//! Input: a binary column of record values (Arrow layout: validity bitmap, i32 offsets,
//! data, as `columnar::decode_columns` makes it), the reader schema as a tree of [`Column`]s
//! (node 0 is the value's struct), and one [`Program`] per writer schema id, compiled by
//! Python from the registered Avro schema: the writer's encoding, each part naming the reader
//! column it fills (or none, to skip a field the table does not have).
//!
//! Each value must be `0x00`, a big-endian i32 schema id with a program, then exactly one
//! Avro binary datum of that schema. A value that is null, unframed, of an unknown id or does
//! not decode whole gets a null row in every column, its schema id (when framed) and its raw
//! bytes in the `raw` column; the others get a null `raw`. A value is first walked without
//! writing, then decoded, so a bad value leaves no partial row.
//!
//! Output per column (Arrow layout, little-endian): `validity` (bit per row) and `nulls`;
//! `boolean`: `values` bitmap; `int`/`float`: 4-byte values; `long`/`double`: 8-byte values;
//! `binary`/`string`: i32 `offsets` (n+1) and `data`; `struct`: children in the tree;
//! `list`: i32 `offsets` (n+1) over its child's rows.
//!
//! Type promotions follow Avro's resolution rules: a writer int fills a long, float or double
//! column, a long a float or double, a float a double, string and bytes each other; an enum
//! fills a string column with its symbol, a fixed a binary column.
use crate::error::{LogError, Result};

/// A reader (table) column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Boolean,
    Int,
    Long,
    Float,
    Double,
    Binary,
    String,
    Struct,
    List,
}

#[derive(Debug, Clone)]
pub struct Column {
    pub kind: Kind,
    pub children: Vec<usize>,
}

/// A writer schema's encoding; `target` is the reader column filled, or None.
#[derive(Debug, Clone)]
pub enum Program {
    Null {
        target: Option<usize>,
    },
    Boolean {
        target: Option<usize>,
    },
    Int {
        target: Option<usize>,
    },
    /// `scale`: what each value is multiplied by (1000 for timestamp-millis into microseconds).
    Long {
        target: Option<usize>,
        scale: i64,
    },
    Float {
        target: Option<usize>,
    },
    Double {
        target: Option<usize>,
    },
    Bytes {
        target: Option<usize>,
    },
    Enum {
        target: Option<usize>,
        symbols: Vec<String>,
    },
    Fixed {
        target: Option<usize>,
        size: usize,
    },
    /// `missing`: the reader struct's children no writer field fills (null in every row).
    Record {
        target: Option<usize>,
        fields: Vec<Program>,
        missing: Vec<usize>,
    },
    Union {
        branches: Vec<Program>,
    },
    Array {
        target: Option<usize>,
        items: Box<Program>,
    },
    /// A JSON object filling struct column `target`, its members by name (json_columns.rs).
    JsonObject {
        target: usize,
        fields: Vec<(String, Program)>,
    },
    /// A JSON array filling list column `target`.
    JsonArray {
        target: usize,
        items: Box<Program>,
    },
    /// A JSON boolean, number or string filling the primitive column `target`.
    JsonValue {
        target: usize,
    },
    /// A Protobuf message filling struct column `target` (proto_columns.rs); `missing`: the
    /// struct's children no field fills.
    ProtoMessage {
        target: Option<usize>,
        fields: Vec<ProtoField>,
        missing: Vec<usize>,
    },
}

/// A Protobuf field's type (a `Program::ProtoMessage` field; read by proto_columns.rs).
#[derive(Debug, Clone)]
pub enum ProtoType {
    Double,
    Float,
    Int32,
    Int64,
    UInt32,
    UInt64,
    SInt32,
    SInt64,
    Fixed32,
    Fixed64,
    SFixed32,
    SFixed64,
    Bool,
    String,
    Bytes,
    /// (number, name) of each value; the first is the default.
    Enum(Vec<(i32, String)>),
    /// A `Program::ProtoMessage` whose target is the field's struct column (the list's
    /// element for a repeated field).
    Message(Box<Program>),
}

#[derive(Debug, Clone)]
pub struct ProtoField {
    pub number: u32,
    pub ty: ProtoType,
    pub repeated: bool,
    /// Absent means null (else the type's default).
    pub presence: bool,
    /// The column filled (the list column of a repeated field), or None to skip the field.
    pub column: Option<usize>,
}

#[derive(Debug, Default)]
pub struct Built {
    pub len: usize,
    pub nulls: usize,
    pub validity: Vec<u8>,
    pub values: Vec<u8>,
    pub offsets: Vec<u8>,
    pub data: Vec<u8>,
    bits: usize, // rows in `values` of a boolean column
}

impl Built {
    fn new(kind: Kind) -> Self {
        let mut b = Built::default();
        if matches!(kind, Kind::Binary | Kind::String | Kind::List) {
            b.offsets.extend_from_slice(&0i32.to_le_bytes());
        }
        b
    }

    pub(crate) fn valid(&mut self, yes: bool) {
        if self.len.is_multiple_of(8) {
            self.validity.push(0);
        }
        if yes {
            let last = self.validity.len() - 1;
            self.validity[last] |= 1 << (self.len % 8);
        } else {
            self.nulls += 1;
        }
        self.len += 1;
    }

    pub(crate) fn bit(&mut self, yes: bool) {
        if self.bits.is_multiple_of(8) {
            self.values.push(0);
        }
        if yes {
            let last = self.values.len() - 1;
            self.values[last] |= 1 << (self.bits % 8);
        }
        self.bits += 1;
    }

    pub(crate) fn end_offset(&mut self, end: usize) -> Result<()> {
        let end = i32::try_from(end).map_err(|_| LogError::invalid(0, format!("column exceeds 2 GiB ({end})")))?;
        self.offsets.extend_from_slice(&end.to_le_bytes());
        Ok(())
    }
}

/// The decoded columns (indexed as the reader tree), the schema ids and the raw values of
/// rows that did not decode.
#[derive(Debug)]
pub struct AvroColumns {
    pub count: usize,
    pub columns: Vec<Built>,
    pub schema_id: Built,
    pub raw: Built,
    pub failures: usize,
    /// The first failure's row and reason, for the log.
    pub first_failure: Option<(usize, String)>,
    /// Every failure's row and reason (the dead-letter table's rows, table/dead_letters.rs).
    pub reasons: Vec<(usize, String)>,
}

pub(crate) struct Decoder<'a> {
    pub(crate) tree: &'a [Column],
    pub(crate) out: Vec<Built>,
    /// rows in each list column's child so far (list offsets)
    pub(crate) child_rows: Vec<usize>,
}

pub(crate) fn bad(what: &str) -> LogError {
    LogError::invalid(0, what.to_string())
}

fn read_long(buf: &[u8], pos: &mut usize) -> Result<i64> {
    let mut v: u64 = 0;
    let mut shift = 0;
    loop {
        let b = *buf.get(*pos).ok_or_else(|| bad("the datum ends inside a number"))?;
        *pos += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            break;
        }
        shift += 7;
        if shift > 63 {
            return Err(bad("a number longer than 10 bytes"));
        }
    }
    Ok(((v >> 1) as i64) ^ -((v & 1) as i64))
}

fn take<'b>(buf: &'b [u8], pos: &mut usize, n: usize) -> Result<&'b [u8]> {
    let end = pos.checked_add(n).filter(|e| *e <= buf.len()).ok_or_else(|| bad("the datum ends inside a value"))?;
    let s = &buf[*pos..end];
    *pos = end;
    Ok(s)
}

fn length(buf: &[u8], pos: &mut usize) -> Result<usize> {
    usize::try_from(read_long(buf, pos)?).map_err(|_| bad("a negative length"))
}

impl Decoder<'_> {
    pub(crate) fn null(&mut self, id: usize) -> Result<()> {
        let kind = self.tree[id].kind;
        self.out[id].valid(false);
        match kind {
            Kind::Boolean => self.out[id].bit(false),
            Kind::Int | Kind::Float => self.out[id].values.extend_from_slice(&[0; 4]),
            Kind::Long | Kind::Double => self.out[id].values.extend_from_slice(&[0; 8]),
            Kind::Binary | Kind::String => {
                let end = self.out[id].data.len();
                self.out[id].end_offset(end)?;
            }
            Kind::Struct => {
                for c in self.tree[id].children.clone() {
                    self.null(c)?;
                }
            }
            Kind::List => {
                let end = self.child_rows[id];
                self.out[id].end_offset(end)?;
            }
        }
        Ok(())
    }

    pub(crate) fn number(&mut self, id: usize, int: Option<i64>, float: Option<f64>) -> Result<()> {
        let b = &mut self.out[id];
        match (self.tree[id].kind, int, float) {
            (Kind::Int, Some(v), _) => {
                b.values.extend_from_slice(&i32::try_from(v).map_err(|_| bad("an int out of range"))?.to_le_bytes());
            }
            (Kind::Long, Some(v), _) => b.values.extend_from_slice(&v.to_le_bytes()),
            (Kind::Float, Some(v), _) => b.values.extend_from_slice(&(v as f32).to_le_bytes()),
            (Kind::Float, None, Some(v)) => b.values.extend_from_slice(&(v as f32).to_le_bytes()),
            (Kind::Double, Some(v), _) => b.values.extend_from_slice(&(v as f64).to_le_bytes()),
            (Kind::Double, None, Some(v)) => b.values.extend_from_slice(&v.to_le_bytes()),
            (k, _, _) => return Err(bad(&format!("a number for a {k:?} column"))),
        }
        b.valid(true);
        Ok(())
    }

    pub(crate) fn bytes(&mut self, id: usize, v: &[u8]) -> Result<()> {
        if !matches!(self.tree[id].kind, Kind::Binary | Kind::String) {
            return Err(bad("bytes for a column that is not binary or string"));
        }
        if self.tree[id].kind == Kind::String && std::str::from_utf8(v).is_err() {
            return Err(bad("a string that is not UTF-8"));
        }
        let b = &mut self.out[id];
        b.data.extend_from_slice(v);
        let end = b.data.len();
        b.end_offset(end)?;
        b.valid(true);
        Ok(())
    }

    /// Walks one datum of `p` at `pos`; writes it when `write` (else only checks it).
    fn datum(&mut self, p: &Program, buf: &[u8], pos: &mut usize, write: bool) -> Result<()> {
        let w = |t: &Option<usize>| if write { *t } else { None };
        match p {
            Program::Null { target } => {
                if let Some(id) = w(target) {
                    self.null(id)?;
                }
            }
            Program::Boolean { target } => {
                let v = take(buf, pos, 1)?[0];
                if v > 1 {
                    return Err(bad("a boolean that is not 0 or 1"));
                }
                if let Some(id) = w(target) {
                    if self.tree[id].kind != Kind::Boolean {
                        return Err(bad("a boolean for a column that is not boolean"));
                    }
                    self.out[id].bit(v == 1);
                    self.out[id].valid(true);
                }
            }
            Program::Int { target } => {
                let v = read_long(buf, pos)?;
                if i32::try_from(v).is_err() {
                    return Err(bad("an int out of range"));
                }
                if let Some(id) = w(target) {
                    self.number(id, Some(v), None)?;
                }
            }
            Program::Long { target, scale } => {
                let v = read_long(buf, pos)?.checked_mul(*scale).ok_or_else(|| bad("a timestamp out of range"))?;
                if let Some(id) = w(target) {
                    self.number(id, Some(v), None)?;
                }
            }
            Program::Float { target } => {
                let b = take(buf, pos, 4)?;
                let v = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                if let Some(id) = w(target) {
                    self.number(id, None, Some(f64::from(v)))?;
                }
            }
            Program::Double { target } => {
                let b = take(buf, pos, 8)?;
                let v = f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
                if let Some(id) = w(target) {
                    self.number(id, None, Some(v))?;
                }
            }
            Program::Bytes { target } => {
                let n = length(buf, pos)?;
                let v = take(buf, pos, n)?;
                if let Some(id) = w(target) {
                    self.bytes(id, v)?;
                } else if let Some(id) = *target {
                    // bytes promoted to a string column: checked here, so the write cannot fail
                    if self.tree[id].kind == Kind::String && std::str::from_utf8(v).is_err() {
                        return Err(bad("bytes for a string column that are not UTF-8"));
                    }
                }
            }
            Program::Enum { target, symbols } => {
                let i = length(buf, pos)?;
                let s = symbols.get(i).ok_or_else(|| bad("an enum index past its symbols"))?;
                if let Some(id) = w(target) {
                    self.bytes(id, s.as_bytes())?;
                }
            }
            Program::Fixed { target, size } => {
                let v = take(buf, pos, *size)?;
                if let Some(id) = w(target) {
                    self.bytes(id, v)?;
                }
            }
            Program::Record { target, fields, missing } => {
                for f in fields {
                    self.datum(f, buf, pos, write)?;
                }
                if let Some(id) = w(target) {
                    for m in missing {
                        self.null(*m)?;
                    }
                    self.out[id].valid(true);
                }
            }
            Program::Union { branches } => {
                let i = length(buf, pos)?;
                let b = branches.get(i).ok_or_else(|| bad("a union index past its branches"))?;
                self.datum(b, buf, pos, write)?;
            }
            Program::JsonObject { .. }
            | Program::JsonArray { .. }
            | Program::JsonValue { .. }
            | Program::ProtoMessage { .. } => {
                return Err(bad("a JSON or Protobuf program inside an Avro one"));
            }
            Program::Array { target, items } => {
                let mut n_items = 0usize;
                loop {
                    let mut n = read_long(buf, pos)?;
                    if n == 0 {
                        break;
                    }
                    if n < 0 {
                        n = n.checked_neg().ok_or_else(|| bad("a bad block count"))?;
                        read_long(buf, pos)?; // the block's size in bytes
                    }
                    for _ in 0..n {
                        self.datum(items, buf, pos, write)?;
                        n_items += 1;
                    }
                }
                if let Some(id) = w(target) {
                    self.child_rows[id] += n_items;
                    let end = self.child_rows[id];
                    self.out[id].end_offset(end)?;
                    self.out[id].valid(true);
                }
            }
        }
        Ok(())
    }
}

impl Program {
    fn is_json(&self) -> bool {
        matches!(self, Program::JsonObject { .. } | Program::JsonArray { .. } | Program::JsonValue { .. })
    }
}

/// Decodes `count` values (see the module doc). `programs`: (schema id, program) pairs.
pub fn decode_avro_columns(
    count: usize,
    validity: &[u8],
    offsets: &[u8],
    data: &[u8],
    tree: &[Column],
    programs: &[(i32, Program)],
) -> Result<AvroColumns> {
    if tree.is_empty() || tree[0].kind != Kind::Struct {
        return Err(bad("the reader schema's root must be a struct"));
    }
    if offsets.len() < (count + 1) * 4 {
        return Err(bad("fewer value offsets than values"));
    }
    let mut d =
        Decoder { tree, out: tree.iter().map(|c| Built::new(c.kind)).collect(), child_rows: vec![0; tree.len()] };
    let mut ids = Built::new(Kind::Int);
    let mut raw = Built::new(Kind::Binary);
    let mut failures = 0;
    let mut first_failure = None;
    let mut reasons = Vec::new();
    let offset = |i: usize| -> usize {
        let b = &offsets[i * 4..i * 4 + 4];
        usize::try_from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])).unwrap_or(0)
    };
    for row in 0..count {
        let present = validity.get(row / 8).is_some_and(|b| b & (1 << (row % 8)) != 0);
        let (start, end) = (offset(row), offset(row + 1));
        let value = data.get(start..end).ok_or_else(|| bad("value offsets past the data"))?;
        let mut schema_id = None;
        let outcome = if !present {
            Err("a null value".to_string())
        } else if value.len() < 5 || value[0] != 0 {
            Err("not in Confluent's framing (magic byte 0, a 4-byte schema id)".to_string())
        } else {
            let id = i32::from_be_bytes([value[1], value[2], value[3], value[4]]);
            schema_id = Some(id);
            match programs.iter().find(|(pid, _)| *pid == id) {
                None => Err(format!("schema id {id} is not an Avro, JSON or Protobuf schema of the value's subject")),
                Some((_, program)) if program.is_json() => d.json_value(program, &value[5..], id)?,
                Some((_, program @ Program::ProtoMessage { .. })) => d.proto_value(program, &value[5..], id)?,
                Some((_, program)) => {
                    let mut pos = 5;
                    match d.datum(program, value, &mut pos, false) {
                        Err(e) => Err(format!("does not decode with schema id {id}: {e}")),
                        Ok(()) if pos != value.len() => {
                            Err(format!("{} bytes left after the datum of schema id {id}", value.len() - pos))
                        }
                        Ok(()) => {
                            let mut pos = 5;
                            d.datum(program, value, &mut pos, true)?;
                            Ok(())
                        }
                    }
                }
            }
        };
        if let Some(id) = schema_id {
            ids.values.extend_from_slice(&id.to_le_bytes());
            ids.valid(true);
        } else {
            ids.values.extend_from_slice(&0i32.to_le_bytes());
            ids.valid(false);
        }
        match outcome {
            Ok(()) => {
                let end = raw.data.len();
                raw.end_offset(end)?;
                raw.valid(false);
            }
            Err(why) => {
                if present {
                    failures += 1;
                    if first_failure.is_none() {
                        first_failure = Some((row, why.clone()));
                    }
                    reasons.push((row, why));
                    raw.data.extend_from_slice(value);
                    let end = raw.data.len();
                    raw.end_offset(end)?;
                    raw.valid(true);
                } else {
                    let end = raw.data.len();
                    raw.end_offset(end)?;
                    raw.valid(false);
                }
                d.null(0)?;
            }
        }
    }
    Ok(AvroColumns { count, columns: d.out, schema_id: ids, raw, failures, first_failure, reasons })
}

/// Value columns for the tests of the decoders (this module's, json_columns', proto_columns').
#[cfg(test)]
pub(crate) mod test_values {
    /// `0x00`, the big-endian schema id, then `rest` (Confluent's framing).
    pub(crate) fn framed(id: i32, rest: &[u8]) -> Vec<u8> {
        let mut v = vec![0];
        v.extend_from_slice(&id.to_be_bytes());
        v.extend_from_slice(rest);
        v
    }

    /// Values as decode_columns lays them out (all present).
    pub(crate) fn column(values: &[Vec<u8>]) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
        let mut validity = vec![0u8; values.len().div_ceil(8)];
        let mut offsets = 0i32.to_le_bytes().to_vec();
        let mut data = Vec::new();
        for (i, v) in values.iter().enumerate() {
            validity[i / 8] |= 1 << (i % 8);
            data.extend_from_slice(v);
            offsets.extend_from_slice(&i32::try_from(data.len()).unwrap().to_le_bytes());
        }
        (validity, offsets, data)
    }
}

#[cfg(test)]
mod tests {
    use super::test_values::{column, framed};
    use super::*;

    fn zig(v: i64) -> Vec<u8> {
        let mut u = ((v << 1) ^ (v >> 63)) as u64;
        let mut out = Vec::new();
        loop {
            let b = (u & 0x7f) as u8;
            u >>= 7;
            if u == 0 {
                out.push(b);
                return out;
            }
            out.push(b | 0x80);
        }
    }

    // Reader: struct{0} <- name string {1}, age long {2}, tags list {3} of string {4}
    fn tree() -> Vec<Column> {
        vec![
            Column { kind: Kind::Struct, children: vec![1, 2, 3] },
            Column { kind: Kind::String, children: vec![] },
            Column { kind: Kind::Long, children: vec![] },
            Column { kind: Kind::List, children: vec![4] },
            Column { kind: Kind::String, children: vec![] },
        ]
    }

    #[test]
    fn decodes_two_writer_versions_and_keeps_bad_values_raw() {
        // v1 (id 1): {name: string, age: int}; v2 (id 2): {name, age: ["null","int"], tags: array<string>, extra: double}
        let v1 = Program::Record {
            target: Some(0),
            fields: vec![Program::Bytes { target: Some(1) }, Program::Int { target: Some(2) }],
            missing: vec![3],
        };
        let v2 = Program::Record {
            target: Some(0),
            fields: vec![
                Program::Bytes { target: Some(1) },
                Program::Union { branches: vec![Program::Null { target: Some(2) }, Program::Int { target: Some(2) }] },
                Program::Array { target: Some(3), items: Box::new(Program::Bytes { target: Some(4) }) },
                Program::Double { target: None },
            ],
            missing: vec![],
        };
        let mut a = zig(3);
        a.extend_from_slice(b"ann");
        a.extend(zig(41));
        let mut b = zig(3);
        b.extend_from_slice(b"bob");
        b.extend(zig(0)); // null age
        b.extend(zig(2));
        for t in [b"x".as_slice(), b"yz"] {
            b.extend(zig(i64::try_from(t.len()).unwrap()));
            b.extend_from_slice(t);
        }
        b.extend(zig(0));
        b.extend_from_slice(&1.5f64.to_le_bytes());
        let values = vec![framed(1, &a), framed(2, &b), b"plain".to_vec(), framed(1, &a[..3]), framed(9, &a)];
        let (validity, offsets, data) = column(&values);
        let c = decode_avro_columns(5, &validity, &offsets, &data, &tree(), &[(1, v1), (2, v2)]).unwrap();
        assert_eq!(c.columns[0].len, 5);
        assert_eq!(c.columns[0].nulls, 3);
        assert_eq!(c.columns[1].data, b"annbob");
        let ages: Vec<i64> = c.columns[2].values.chunks(8).map(|b| i64::from_le_bytes(b.try_into().unwrap())).collect();
        assert_eq!(ages, vec![41, 0, 0, 0, 0]);
        assert_eq!(c.columns[2].validity, vec![0b0000_0001]);
        assert_eq!(c.columns[4].data, b"xyz");
        let list_offsets: Vec<i32> =
            c.columns[3].offsets.chunks(4).map(|b| i32::from_le_bytes(b.try_into().unwrap())).collect();
        assert_eq!(list_offsets, vec![0, 0, 2, 2, 2, 2]);
        assert_eq!(c.columns[3].validity, vec![0b0000_0010]); // v1 has no tags: null
        assert_eq!(c.failures, 3);
        assert_eq!(c.raw.validity, vec![0b0001_1100]);
        assert_eq!(c.schema_id.validity, vec![0b0001_1011]);
        assert!(c.first_failure.unwrap().1.contains("Confluent"));
        for col in &c.columns[..4] {
            assert_eq!(col.len, 5, "every column but the list's child has a row per value");
        }
        assert_eq!(c.columns[4].len, 2, "the list's child has a row per item");
    }

    #[test]
    fn bytes_promoted_to_a_string_column_that_are_not_utf8_are_a_failure_not_an_error() {
        let p =
            Program::Record { target: Some(0), fields: vec![Program::Bytes { target: Some(1) }], missing: vec![2, 3] };
        let mut bad_utf8 = zig(2);
        bad_utf8.extend_from_slice(&[0xff, 0xfe]);
        let mut ok = zig(2);
        ok.extend_from_slice(b"ok");
        let values = vec![framed(1, &bad_utf8), framed(1, &ok)];
        let (validity, offsets, data) = column(&values);
        let c = decode_avro_columns(2, &validity, &offsets, &data, &tree(), &[(1, p)]).unwrap();
        assert_eq!(c.failures, 1);
        assert_eq!(c.columns[1].data, b"ok");
        assert_eq!(c.columns[1].validity, vec![0b10]);
    }

    #[test]
    fn truncated_and_trailing_data_are_failures_not_partial_rows() {
        let p =
            Program::Record { target: Some(0), fields: vec![Program::Bytes { target: Some(1) }], missing: vec![2, 3] };
        let mut ok = zig(2);
        ok.extend_from_slice(b"hi");
        let mut trailing = ok.clone();
        trailing.push(7);
        let values = vec![framed(1, &ok[..2]), framed(1, &trailing), framed(1, &ok)];
        let (validity, offsets, data) = column(&values);
        let c = decode_avro_columns(3, &validity, &offsets, &data, &tree(), &[(1, p)]).unwrap();
        assert_eq!(c.failures, 2);
        assert_eq!(c.columns[1].data, b"hi");
        assert_eq!(c.columns[1].validity, vec![0b100]);
    }
}
