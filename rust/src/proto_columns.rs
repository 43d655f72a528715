//! Protobuf values (Confluent's framing: `0x00`, a big-endian i32 schema id, the message
//! indexes, then the message's wire bytes) decoded into the Arrow-layout columns of
//! rust/src/avro_columns.rs, for Iceberg topics whose subject holds Protobuf versions
//! (python/logbroker/iceberg/value_schema.py compiles a `Program::ProtoMessage` per version).
//!
//! Message indexes: a zigzag varint count, then that many zigzag varint indexes; a lone 0
//! byte stands for `[0]`. The table's message is the schema's first (`[0]`); a value of
//! another message of the file is a failure.
//!
//! A message is first parsed whole (fields by number, in any order, unknown ones skipped by
//! their wire type, repeated scalars packed or not), then written field by field in the
//! table's order, so a bad value leaves no partial row. A field given more than once keeps
//! its last value (a message field too: Protobuf would merge them). An absent field is
//! null when it has presence (messages, `optional`, oneof members, proto2), else its
//! default: 0, false, "", the enum's first value; an absent repeated field is an empty list.
//! An enum value with no name (an open enum) is written as its number.
use crate::avro_columns::{bad, Decoder, Kind, Program};
pub use crate::avro_columns::{ProtoField, ProtoType};
use crate::error::Result;

/// One wire value of a field.
enum Wire<'a> {
    Varint(u64),
    Fixed32(u32),
    Fixed64(u64),
    Bytes(&'a [u8]),
    Message(Parsed<'a>),
}

/// A parsed message: per program field, its values in wire order.
struct Parsed<'a> {
    values: Vec<Vec<Wire<'a>>>,
}

fn varint(buf: &[u8], pos: &mut usize) -> Result<u64> {
    let mut v: u64 = 0;
    for shift in (0..70).step_by(7) {
        let b = *buf.get(*pos).ok_or_else(|| bad("the message ends inside a varint"))?;
        *pos += 1;
        v |= u64::from(b & 0x7f) << shift.min(63);
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err(bad("a varint longer than 10 bytes"))
}

fn take<'b>(buf: &'b [u8], pos: &mut usize, n: usize) -> Result<&'b [u8]> {
    let end = pos.checked_add(n).filter(|e| *e <= buf.len()).ok_or_else(|| bad("the message ends inside a field"))?;
    let s = &buf[*pos..end];
    *pos = end;
    Ok(s)
}

fn zigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// The message indexes after the schema id: Ok(their length) when they are `[0]`.
pub(crate) fn first_message(buf: &[u8]) -> std::result::Result<usize, String> {
    let mut pos = 0;
    let count = varint(buf, &mut pos).map_err(|e| format!("bad message indexes: {e}"))?;
    let count = zigzag(count);
    if count == 0 {
        return Ok(pos);
    }
    let mut path = Vec::new();
    for _ in 0..count.clamp(0, 64) {
        path.push(zigzag(varint(buf, &mut pos).map_err(|e| format!("bad message indexes: {e}"))?));
    }
    if path == [0] {
        Ok(pos)
    } else {
        Err(format!("message index path {path:?} is not the table's message (the schema's first, [0])"))
    }
}

fn scalar_wire(ty: &ProtoType) -> u8 {
    match ty {
        ProtoType::Double | ProtoType::Fixed64 | ProtoType::SFixed64 => 1,
        ProtoType::Float | ProtoType::Fixed32 | ProtoType::SFixed32 => 5,
        ProtoType::String | ProtoType::Bytes | ProtoType::Message(_) => 2,
        _ => 0,
    }
}

fn fields_of(p: &Program) -> Result<(&[ProtoField], Option<usize>, &[usize])> {
    match p {
        Program::ProtoMessage { target, fields, missing } => Ok((fields, *target, missing)),
        _ => Err(bad("a Protobuf message's program is not a message")),
    }
}

/// Parses `buf` as the message of `p` (checking everything the write needs).
fn parse<'a>(p: &Program, buf: &'a [u8], depth: usize) -> Result<Parsed<'a>> {
    if depth > 64 {
        return Err(bad("messages nested deeper than 64"));
    }
    let (fields, _, _) = fields_of(p)?;
    let mut out = Parsed { values: fields.iter().map(|_| Vec::new()).collect() };
    let mut pos = 0;
    while pos < buf.len() {
        let tag = varint(buf, &mut pos)?;
        let (number, wire) = (tag >> 3, (tag & 7) as u8);
        let value = match wire {
            0 => Wire::Varint(varint(buf, &mut pos)?),
            1 => {
                let b = take(buf, &mut pos, 8)?;
                Wire::Fixed64(u64::from_le_bytes(b.try_into().map_err(|_| bad("short fixed64"))?))
            }
            5 => {
                let b = take(buf, &mut pos, 4)?;
                Wire::Fixed32(u32::from_le_bytes(b.try_into().map_err(|_| bad("short fixed32"))?))
            }
            2 => {
                let n = usize::try_from(varint(buf, &mut pos)?).map_err(|_| bad("a length past the message"))?;
                Wire::Bytes(take(buf, &mut pos, n)?)
            }
            w => return Err(bad(&format!("field {number} has wire type {w} (groups are not read)"))),
        };
        let Some(i) = fields.iter().position(|f| u64::from(f.number) == number) else { continue };
        let field = &fields[i];
        let want = scalar_wire(&field.ty);
        match (value, &field.ty) {
            (Wire::Bytes(b), ProtoType::Message(m)) => out.values[i].push(Wire::Message(parse(m, b, depth + 1)?)),
            (Wire::Bytes(b), ProtoType::String) => {
                std::str::from_utf8(b).map_err(|_| bad(&format!("field {number} is a string that is not UTF-8")))?;
                out.values[i].push(Wire::Bytes(b));
            }
            (Wire::Bytes(b), ProtoType::Bytes) => out.values[i].push(Wire::Bytes(b)),
            (Wire::Bytes(b), _) if field.repeated && want != 2 => {
                // packed: the items back to back
                let mut at = 0;
                while at < b.len() {
                    let item = match want {
                        0 => Wire::Varint(varint(b, &mut at)?),
                        1 => Wire::Fixed64(u64::from_le_bytes(
                            take(b, &mut at, 8)?.try_into().map_err(|_| bad("short"))?,
                        )),
                        _ => Wire::Fixed32(u32::from_le_bytes(
                            take(b, &mut at, 4)?.try_into().map_err(|_| bad("short"))?,
                        )),
                    };
                    out.values[i].push(item);
                }
            }
            (v @ Wire::Varint(_), _) if want == 0 => out.values[i].push(v),
            (v @ Wire::Fixed64(_), _) if want == 1 => out.values[i].push(v),
            (v @ Wire::Fixed32(_), _) if want == 5 => out.values[i].push(v),
            _ => return Err(bad(&format!("field {number} has wire type {wire}, not its type's"))),
        }
    }
    Ok(out)
}

impl Decoder<'_> {
    /// One framed value's message bytes (after the indexes): Ok(Ok) when its row was
    /// written, Ok(Err(reason)) when it does not parse (nothing written).
    pub(crate) fn proto_value(
        &mut self,
        program: &Program,
        bytes: &[u8],
        id: i32,
    ) -> Result<std::result::Result<(), String>> {
        let start = match first_message(bytes) {
            Ok(n) => n,
            Err(why) => return Ok(Err(format!("schema id {id}: {why}"))),
        };
        let parsed = match parse(program, &bytes[start..], 0) {
            Ok(p) => p,
            Err(e) => return Ok(Err(format!("does not decode with schema id {id}: {e}"))),
        };
        self.proto_write(program, &parsed)?;
        Ok(Ok(()))
    }

    fn proto_write(&mut self, p: &Program, m: &Parsed<'_>) -> Result<()> {
        let (fields, target, missing) = fields_of(p)?;
        for (f, values) in fields.iter().zip(&m.values) {
            let Some(column) = f.column else { continue };
            if f.repeated {
                let item = self.tree[column].children[0];
                for v in values {
                    self.proto_item(&f.ty, item, v)?;
                }
                self.child_rows[column] += values.len();
                let end = self.child_rows[column];
                self.out[column].end_offset(end)?;
                self.out[column].valid(true);
            } else if let Some(v) = values.last() {
                self.proto_item(&f.ty, column, v)?;
            } else if f.presence {
                self.null(column)?;
            } else {
                self.proto_default(&f.ty, column)?;
            }
        }
        if let Some(t) = target {
            for c in missing {
                self.null(*c)?;
            }
            self.out[t].valid(true);
        }
        Ok(())
    }

    fn proto_item(&mut self, ty: &ProtoType, column: usize, v: &Wire<'_>) -> Result<()> {
        match (ty, v) {
            (ProtoType::Message(m), Wire::Message(parsed)) => self.proto_write(m, parsed),
            (ProtoType::String | ProtoType::Bytes, Wire::Bytes(b)) => self.bytes(column, b),
            (ProtoType::Bool, Wire::Varint(x)) => {
                if self.tree[column].kind != Kind::Boolean {
                    return Err(bad("a bool for a column that is not boolean"));
                }
                self.out[column].bit(*x != 0);
                self.out[column].valid(true);
                Ok(())
            }
            (ProtoType::Enum(values), Wire::Varint(x)) => {
                let n = *x as i64 as i32;
                match values.iter().find(|(v, _)| *v == n) {
                    Some((_, name)) => self.bytes(column, name.as_bytes()),
                    None => self.bytes(column, n.to_string().as_bytes()),
                }
            }
            (ProtoType::Int32, Wire::Varint(x)) => self.number(column, Some(i64::from(*x as i64 as i32)), None),
            (ProtoType::Int64 | ProtoType::UInt64, Wire::Varint(x))
            | (ProtoType::Fixed64 | ProtoType::SFixed64, Wire::Fixed64(x)) => {
                self.number(column, Some(*x as i64), None)
            }
            (ProtoType::UInt32, Wire::Varint(x)) => self.number(column, Some(i64::from(*x as u32)), None),
            (ProtoType::SInt32, Wire::Varint(x)) => self.number(column, Some(i64::from(zigzag(*x) as i32)), None),
            (ProtoType::SInt64, Wire::Varint(x)) => self.number(column, Some(zigzag(*x)), None),
            (ProtoType::Fixed32, Wire::Fixed32(x)) => self.number(column, Some(i64::from(*x)), None),
            (ProtoType::SFixed32, Wire::Fixed32(x)) => self.number(column, Some(i64::from(*x as i32)), None),
            (ProtoType::Float, Wire::Fixed32(x)) => self.number(column, None, Some(f64::from(f32::from_bits(*x)))),
            (ProtoType::Double, Wire::Fixed64(x)) => self.number(column, None, Some(f64::from_bits(*x))),
            _ => Err(bad("a Protobuf value of another type than its field's")),
        }
    }

    fn proto_default(&mut self, ty: &ProtoType, column: usize) -> Result<()> {
        match ty {
            ProtoType::Message(_) => self.null(column),
            ProtoType::String | ProtoType::Bytes => self.bytes(column, b""),
            ProtoType::Bool => self.proto_item(ty, column, &Wire::Varint(0)),
            ProtoType::Enum(values) => match values.first() {
                Some((_, name)) => self.bytes(column, name.as_bytes()),
                None => self.null(column),
            },
            ProtoType::Float | ProtoType::Double => self.number(column, None, Some(0.0)),
            _ => self.number(column, Some(0), None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{ProtoField, ProtoType};
    use crate::avro_columns::test_values::{self, column};
    use crate::avro_columns::{decode_avro_columns, Column, Kind, Program};

    fn var(mut v: u64, out: &mut Vec<u8>) {
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(b);
                return;
            }
            out.push(b | 0x80);
        }
    }

    fn framed(id: i32, indexes: &[u8], msg: &[u8]) -> Vec<u8> {
        test_values::framed(id, &[indexes, msg].concat())
    }

    #[test]
    fn messages_decode_by_field_number_with_defaults_and_packed_lists() {
        // Order { int64 id = 1; repeated sint32 deltas = 2 (packed); Kind kind = 3;
        //         optional string note = 4; Line line = 5 { string sku = 1; } }
        // tree: struct{0} <- id long{1}, deltas list{2} of int{3}, kind string{4}, note string{5},
        //                    line struct{6} <- sku string{7}
        let tree = vec![
            Column { kind: Kind::Struct, children: vec![1, 2, 4, 5, 6] },
            Column { kind: Kind::Long, children: vec![] },
            Column { kind: Kind::List, children: vec![3] },
            Column { kind: Kind::Int, children: vec![] },
            Column { kind: Kind::String, children: vec![] },
            Column { kind: Kind::String, children: vec![] },
            Column { kind: Kind::Struct, children: vec![7] },
            Column { kind: Kind::String, children: vec![] },
        ];
        let field = |number, ty, repeated, presence, column| ProtoField {
            number,
            ty,
            repeated,
            presence,
            column: Some(column),
        };
        let line = Program::ProtoMessage {
            target: Some(6),
            fields: vec![field(1, ProtoType::String, false, false, 7)],
            missing: vec![],
        };
        let order = Program::ProtoMessage {
            target: Some(0),
            fields: vec![
                field(1, ProtoType::Int64, false, false, 1),
                field(2, ProtoType::SInt32, true, false, 2),
                field(3, ProtoType::Enum(vec![(0, "VIEW".into()), (1, "BUY".into())]), false, false, 4),
                field(4, ProtoType::String, false, true, 5),
                field(5, ProtoType::Message(Box::new(line)), false, true, 6),
            ],
            missing: vec![],
        };
        // full: id 7, deltas [-1, 2] packed, kind BUY, note "n", line {sku "s"}, unknown field 9
        let mut full = vec![0x08];
        var(7, &mut full);
        full.extend_from_slice(&[0x12, 2, 1, 4]); // zigzag(-1)=1, zigzag(2)=4
        full.extend_from_slice(&[0x18, 1, 0x22, 1, b'n', 0x2a, 3, 0x0a, 1, b's']);
        full.extend_from_slice(&[0x48, 5]);
        let empty: Vec<u8> = vec![]; // every field absent: defaults, nulls, an empty list
        let values = vec![
            framed(3, &[0], &full),
            framed(3, &[2, 0], &empty),        // indexes [0] written long-hand
            framed(3, &[2, 2], &empty),        // message [1]: not the table's
            framed(3, &[0], &[0x08]),          // truncated
            framed(3, &[0], &[0x22, 1, 0xff]), // note not UTF-8
        ];
        let (validity, offsets, data) = column(&values);
        let c = decode_avro_columns(5, &validity, &offsets, &data, &tree, &[(3, order)]).unwrap();
        let ids: Vec<i64> = c.columns[1].values.chunks(8).map(|b| i64::from_le_bytes(b.try_into().unwrap())).collect();
        assert_eq!(ids, vec![7, 0, 0, 0, 0]);
        assert_eq!(c.columns[1].validity, vec![0b11], "absent id: its default 0, not null");
        let deltas: Vec<i32> =
            c.columns[3].values.chunks(4).map(|b| i32::from_le_bytes(b.try_into().unwrap())).collect();
        assert_eq!(deltas, vec![-1, 2]);
        assert_eq!(c.columns[2].validity, vec![0b11], "absent repeated: an empty list");
        assert_eq!(c.columns[4].data, b"BUYVIEW");
        assert_eq!(c.columns[5].data, b"n");
        assert_eq!(c.columns[5].validity, vec![0b01], "absent optional: null");
        assert_eq!(c.columns[7].data, b"s");
        assert_eq!(c.columns[6].validity, vec![0b01]);
        assert_eq!(c.failures, 3);
        let why = c.first_failure.unwrap();
        assert_eq!(why.0, 2);
        assert!(why.1.contains("[1]"), "{}", why.1);
    }
}
