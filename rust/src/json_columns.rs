//! JSON Schema values (Confluent's framing: `0x00`, a big-endian i32 schema id, then the JSON
//! text) decoded into the Arrow-layout columns of rust/src/avro_columns.rs, for Iceberg topics
//! whose subject holds JSON Schema versions (python/logbroker/iceberg/value_schema.py).
//!
//! A JSON program mirrors the reader tree: `JsonObject` names each child of a struct column,
//! `JsonArray` fills a list column, `JsonValue` a primitive one. JSON carries no writer schema
//! to resolve against, so one program serves every JSON version of the subject, and members
//! are matched by name: a member the table has no column for is skipped, a column with no
//! member (or a JSON null) is null.
//!
//! What fills what: a boolean a boolean column; an integral number an int (if it fits in 32
//! bits) or long column; any number a float or double column; a string a string or binary
//! column (its UTF-8 bytes); an object a struct column; an array a list column. Anything else
//! (a string for a long column, say) makes the value a failure: it is checked whole before a
//! byte is written, and goes to the `raw` column with its reason.
use serde_json::Value;

use crate::avro_columns::{bad, Decoder, Kind, Program};
use crate::error::Result;

/// An integral JSON number as i64, when it is one (2.0 counts; 2.5 does not).
fn integral(v: &serde_json::Number) -> Option<i64> {
    if let Some(i) = v.as_i64() {
        return Some(i);
    }
    let f = v.as_f64()?;
    (f.fract() == 0.0 && f.abs() < 9.2e18).then_some(f as i64)
}

fn describe(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

impl Decoder<'_> {
    /// One framed value's JSON text: Ok(Ok) when its row was written, Ok(Err(reason)) when it
    /// does not fit (nothing written), Err only for a column past 2 GiB.
    pub(crate) fn json_value(
        &mut self,
        program: &Program,
        text: &[u8],
        id: i32,
    ) -> Result<std::result::Result<(), String>> {
        let value: Value = match serde_json::from_slice(text) {
            Ok(v) => v,
            Err(e) => return Ok(Err(format!("is not JSON (schema id {id}): {e}"))),
        };
        if !value.is_object() {
            return Ok(Err(format!("is {} where schema id {id} wants an object", describe(&value))));
        }
        if let Err(why) = self.json_fits(program, Some(&value), "$") {
            return Ok(Err(format!("does not fit the table with schema id {id}: {why}")));
        }
        self.json_write(program, Some(&value))?;
        Ok(Ok(()))
    }

    /// Whether `v` (None: absent) fills `p`'s columns; the reason names the JSON path.
    fn json_fits(&self, p: &Program, v: Option<&Value>, path: &str) -> std::result::Result<(), String> {
        let Some(v) = v.filter(|v| !v.is_null()) else { return Ok(()) };
        match (p, v) {
            (Program::JsonObject { fields, .. }, Value::Object(members)) => {
                for (name, f) in fields {
                    self.json_fits(f, members.get(name), &format!("{path}.{name}"))?;
                }
                Ok(())
            }
            (Program::JsonArray { items, .. }, Value::Array(elements)) => {
                for (i, e) in elements.iter().enumerate() {
                    self.json_fits(items, Some(e), &format!("{path}[{i}]"))?;
                }
                Ok(())
            }
            (Program::JsonValue { target }, v) => {
                let kind = self.tree[*target].kind;
                let fits = match (kind, v) {
                    (Kind::Boolean, Value::Bool(_))
                    | (Kind::Float | Kind::Double, Value::Number(_))
                    | (Kind::String | Kind::Binary, Value::String(_)) => true,
                    (Kind::Long, Value::Number(n)) => integral(n).is_some(),
                    (Kind::Int, Value::Number(n)) => integral(n).is_some_and(|i| i32::try_from(i).is_ok()),
                    _ => false,
                };
                if fits {
                    Ok(())
                } else {
                    Err(format!("{path} is {} for a {kind:?} column", describe(v)))
                }
            }
            (Program::JsonObject { .. }, v) => Err(format!("{path} is {} for a struct column", describe(v))),
            (Program::JsonArray { .. }, v) => Err(format!("{path} is {} for a list column", describe(v))),
            _ => Err(format!("{path}: an Avro program inside a JSON one")),
        }
    }

    /// Writes `v` (checked by `json_fits`) into `p`'s columns.
    fn json_write(&mut self, p: &Program, v: Option<&Value>) -> Result<()> {
        let target = match p {
            Program::JsonObject { target, .. } | Program::JsonArray { target, .. } | Program::JsonValue { target } => {
                *target
            }
            _ => return Err(bad("an Avro program inside a JSON one")),
        };
        let Some(v) = v.filter(|v| !v.is_null()) else { return self.null(target) };
        match (p, v) {
            (Program::JsonObject { fields, .. }, Value::Object(members)) => {
                for (name, f) in fields {
                    self.json_write(f, members.get(name))?;
                }
                self.out[target].valid(true);
            }
            (Program::JsonArray { items, .. }, Value::Array(elements)) => {
                for e in elements {
                    self.json_write(items, Some(e))?;
                }
                self.child_rows[target] += elements.len();
                let end = self.child_rows[target];
                self.out[target].end_offset(end)?;
                self.out[target].valid(true);
            }
            (Program::JsonValue { .. }, Value::Bool(b)) => {
                self.out[target].bit(*b);
                self.out[target].valid(true);
            }
            (Program::JsonValue { .. }, Value::Number(n)) => {
                let int = if matches!(self.tree[target].kind, Kind::Int | Kind::Long) { integral(n) } else { None };
                self.number(target, int, n.as_f64())?;
            }
            (Program::JsonValue { .. }, Value::String(s)) => self.bytes(target, s.as_bytes())?,
            _ => return Err(bad("a JSON value written without being checked")),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::avro_columns::test_values::{self, column};
    use crate::avro_columns::{decode_avro_columns, Column, Kind, Program};

    fn framed(id: i32, text: &str) -> Vec<u8> {
        test_values::framed(id, text.as_bytes())
    }

    #[test]
    fn json_values_fill_columns_by_name_and_misfits_stay_raw() {
        // struct{0} <- name string {1}, n long {2}, score double {3}, tags list {4} of string {5},
        //              at struct {6} <- ok boolean {7}
        let tree = vec![
            Column { kind: Kind::Struct, children: vec![1, 2, 3, 4, 6] },
            Column { kind: Kind::String, children: vec![] },
            Column { kind: Kind::Long, children: vec![] },
            Column { kind: Kind::Double, children: vec![] },
            Column { kind: Kind::List, children: vec![5] },
            Column { kind: Kind::String, children: vec![] },
            Column { kind: Kind::Struct, children: vec![7] },
            Column { kind: Kind::Boolean, children: vec![] },
        ];
        let program = Program::JsonObject {
            target: 0,
            fields: vec![
                ("name".into(), Program::JsonValue { target: 1 }),
                ("n".into(), Program::JsonValue { target: 2 }),
                ("score".into(), Program::JsonValue { target: 3 }),
                ("tags".into(), Program::JsonArray { target: 4, items: Box::new(Program::JsonValue { target: 5 }) }),
                (
                    "at".into(),
                    Program::JsonObject { target: 6, fields: vec![("ok".into(), Program::JsonValue { target: 7 })] },
                ),
            ],
        };
        let values = vec![
            framed(7, r#"{"name":"ann","n":3,"score":1,"tags":["x","y"],"at":{"ok":true},"extra":[1]}"#),
            framed(7, r#"{"name":"bob","n":2.0,"tags":null}"#),
            framed(7, r#"{"name":"cy","n":"three"}"#), // a string for a long: raw, nothing written
            framed(7, "[1,2]"),
            framed(7, "{not json"),
            framed(8, r#"{"name":"dee"}"#), // no program for id 8
        ];
        let (validity, offsets, data) = column(&values);
        let c = decode_avro_columns(6, &validity, &offsets, &data, &tree, &[(7, program)]).unwrap();
        assert_eq!(c.columns[1].data, b"annbob");
        let ns: Vec<i64> = c.columns[2].values.chunks(8).map(|b| i64::from_le_bytes(b.try_into().unwrap())).collect();
        assert_eq!(ns, vec![3, 2, 0, 0, 0, 0]);
        let scores: Vec<f64> =
            c.columns[3].values.chunks(8).map(|b| f64::from_le_bytes(b.try_into().unwrap())).collect();
        assert_eq!(scores[0].to_bits(), 1.0f64.to_bits());
        assert_eq!(c.columns[3].validity, vec![0b01], "bob has no score");
        assert_eq!(c.columns[5].data, b"xy");
        assert_eq!(c.columns[4].validity, vec![0b01], "bob's tags are null");
        assert_eq!(c.columns[7].values, vec![0b1]);
        assert_eq!(c.columns[6].validity, vec![0b01]);
        assert_eq!(c.columns[0].validity, vec![0b11]);
        assert_eq!(c.failures, 4);
        assert_eq!(c.raw.validity, vec![0b11_1100]);
        let why = c.first_failure.unwrap();
        assert_eq!(why.0, 2);
        assert!(why.1.contains("$.n is a string for a Long column"), "{}", why.1);
        for col in &c.columns[..5] {
            assert_eq!(col.len, 6, "a row per value in every column but the list's child");
        }
        assert_eq!(c.columns[5].len, 2);
    }
}
