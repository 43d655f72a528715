"""Columns from the registered value schema (`iceberg.mode=value_schema_id_prefix`): the
table's `value` column is a struct of the Avro record's fields, the JSON Schema object's
properties or the Protobuf message's fields, decoded in Rust (`_core.TableDataFiles`,
rust/src/avro_columns.rs, json_columns.rs and proto_columns.rs) from Confluent-framed values.

The table's value struct is the union, by field name, of every Avro, JSON Schema and Protobuf version
registered under `<topic>-value` (newest first: a field keeps its newest type, widened where an older
version's is wider by Avro's promotions: int < long < float < double). A new version
registered later adds its new fields to the table (Iceberg schema evolution: new optional
columns; rows written before read them as null). Every field is optional.

Avro types and the table's:

    boolean, int, long, float, double        the same
    string, enum (its symbol), uuid          string
    bytes, fixed, decimal                    binary (decimal: its unscaled bytes)
    date                                     date
    timestamp-millis, timestamp-micros       timestamptz (microseconds)
    record                                   struct        array  list
    union of null and one type               that type, optional
    map, other unions, null                  not in the table (the field is skipped)

JSON Schema types and the table's (a value's members are matched by name; see
rust/src/json_columns.rs for which JSON values fill which columns):

    boolean, string                          the same
    integer                                  long
    number                                   double
    object with properties                   struct        array with items  list
    ["T", "null"], oneOf/anyOf of null and one type   T, optional
    $ref to "#/..." in the same document     the type it names (a recursive one is skipped)
    anything else (no type, maps, unions, external $refs)   not in the table

Protobuf types and the table's (the table's message is the schema's first, message index
[0]; rust/src/proto_columns.rs reads the wire format):

    double, float, bool, string, bytes       double, float, boolean, string, binary
    int32, sint32, sfixed32                  int
    int64, sint64, sfixed64, uint32, fixed32, uint64, fixed64   long (uint64 and fixed64
                                             past 2^63 wrap, as Spark's from_protobuf reads them)
    enum                                     string (the value's name; an unnamed one its number)
    message                                  struct        repeated  list
    map, group, a message inside itself      not in the table

A value that is not framed, names an id that is not an Avro version of the subject, or does
not decode, gets a null `value`, its `value_schema_id` when framed, and its bytes in
`value_raw`: nothing is lost, and such rows are found with `value_raw IS NOT NULL`.

The reader tree and writer programs given to Rust: the tree is the table's value struct in
pre-order, `(kind, children)`; a program is nested tuples `(kind, target, ...)` naming the
tree node each part fills (-1: none), see rust/src/avro_columns.rs.
"""

from __future__ import annotations

import json
import logging
from typing import Any, NamedTuple

from logbroker.iceberg import IcebergError

log = logging.getLogger("logbroker.iceberg")

_PRIMITIVE_RANK = {"int": 0, "long": 1, "float": 2, "double": 3}


class ValueSchema(NamedTuple):
    """A version registered under `<topic>-value`, as the registry holds it."""

    id: int
    text: str
    schema_type: str = "AVRO"  # the registry's schemaType: AVRO, JSON or PROTOBUF


# --- Avro schema to an abstract column type ------------------------------------------
# An abstract type: ("boolean"|"int"|"long"|"float"|"double"|"string"|"binary"|"date"|
# "timestamp") or ("struct", [(name, type), ...]) or ("list", type); None: not representable.


def _named(schema: Any, names: dict[str, Any], namespace: str | None) -> Any:
    """Resolve a reference to a named type; register named types as they are defined."""
    if isinstance(schema, str) and schema not in (
        "null",
        "boolean",
        "int",
        "long",
        "float",
        "double",
        "bytes",
        "string",
    ):
        full = schema if "." in schema or namespace is None else f"{namespace}.{schema}"
        for candidate in (full, schema):
            if candidate in names:
                return names[candidate]
        raise IcebergError(f"Avro schema names an undefined type {schema!r}")
    if isinstance(schema, dict) and schema.get("type") in ("record", "enum", "fixed") and "name" in schema:
        name = schema["name"]
        ns = schema.get("namespace", namespace)
        full = name if "." in name or not ns else f"{ns}.{name}"
        names[full] = schema
        names.setdefault(name, schema)
    return schema


def _namespace(schema: Any, namespace: str | None) -> str | None:
    if isinstance(schema, dict) and schema.get("type") == "record":
        name = schema.get("name", "")
        return name.rpartition(".")[0] if "." in name else schema.get("namespace", namespace)
    return namespace


MAX_DEPTH = 32  # nesting the broker follows; a recursive schema goes deeper and has no columns


def column_type(schema: Any, names: dict[str, Any] | None = None, namespace: str | None = None, depth: int = 0) -> Any:
    """The table type of an Avro schema (parsed JSON), or None when it has none."""
    names = {} if names is None else names
    if depth > MAX_DEPTH:
        return None
    schema = _named(schema, names, namespace)
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null" and b != {"type": "null"}]
        return column_type(branches[0], names, namespace, depth + 1) if len(branches) == 1 else None
    if isinstance(schema, str):
        return {
            "boolean": "boolean",
            "int": "int",
            "long": "long",
            "float": "float",
            "double": "double",
            "bytes": "binary",
            "string": "string",
        }.get(schema)
    if not isinstance(schema, dict):
        return None
    t, logical = schema.get("type"), schema.get("logicalType")
    if logical == "date" and t == "int":
        return "date"
    if logical in ("timestamp-millis", "timestamp-micros") and t == "long":
        return "timestamp"
    if logical == "decimal":
        return "binary"
    if t == "record":
        ns = _namespace(schema, namespace)
        fields = []
        for f in schema.get("fields", []):
            ft = column_type(f["type"], names, ns, depth + 1)
            if ft is not None:
                fields.append((f["name"], ft))
        return ("struct", fields)
    if t == "enum":
        return "string"
    if t == "fixed":
        return "binary"
    if t == "array":
        item = column_type(schema["items"], names, namespace, depth + 1)
        return ("list", item) if item is not None else None
    if isinstance(t, (str, list, dict)) and t not in ("map", "null"):
        return column_type(t, names, namespace, depth + 1)  # {"type": "string"} and the like
    return None


_JSON_PRIMITIVE = {"boolean": "boolean", "integer": "long", "number": "double", "string": "string"}


def json_column_type(schema: Any, root: Any = None, refs: tuple[str, ...] = (), depth: int = 0) -> Any:
    """The table type of a JSON Schema (parsed), or None when it has none; `root` is the
    document `$ref`s point into."""
    root = schema if root is None else root
    if depth > MAX_DEPTH or not isinstance(schema, dict):
        return None
    ref = schema.get("$ref")
    if isinstance(ref, str):
        if not ref.startswith("#") or ref in refs:
            return None  # another document's, or a recursive one
        target: Any = root
        for part in [p for p in ref[1:].split("/") if p]:
            part = part.replace("~1", "/").replace("~0", "~")
            target = target.get(part) if isinstance(target, dict) else None
        return json_column_type(target, root, refs + (ref,), depth + 1)
    for key in ("oneOf", "anyOf"):
        if isinstance(schema.get(key), list):
            branches = [b for b in schema[key] if not (isinstance(b, dict) and b.get("type") == "null")]
            return json_column_type(branches[0], root, refs, depth + 1) if len(branches) == 1 else None
    t = schema.get("type")
    if isinstance(t, list):
        kinds = [k for k in t if k != "null"]
        t = kinds[0] if len(kinds) == 1 else None
    if t is None and isinstance(schema.get("properties"), dict):
        t = "object"
    if t in _JSON_PRIMITIVE:
        return _JSON_PRIMITIVE[t]
    if t == "object" and isinstance(schema.get("properties"), dict):
        fields = []
        for name, sub in schema["properties"].items():
            ft = json_column_type(sub, root, refs, depth + 1)
            if ft is not None:
                fields.append((name, ft))
        return ("struct", fields)
    if t == "array" and isinstance(schema.get("items"), dict):
        item = json_column_type(schema["items"], root, refs, depth + 1)
        return ("list", item) if item is not None else None
    return None


# --- Protobuf schema to an abstract column type ------------------------------------------


def _proto_kinds() -> dict[int, tuple[str, str]]:
    """Field type -> (the wire program's name, the column type)."""
    from google.protobuf.descriptor_pb2 import FieldDescriptorProto as F

    return {
        F.TYPE_DOUBLE: ("double", "double"),
        F.TYPE_FLOAT: ("float", "float"),
        F.TYPE_INT32: ("int32", "int"),
        F.TYPE_INT64: ("int64", "long"),
        F.TYPE_UINT32: ("uint32", "long"),
        F.TYPE_UINT64: ("uint64", "long"),
        F.TYPE_SINT32: ("sint32", "int"),
        F.TYPE_SINT64: ("sint64", "long"),
        F.TYPE_FIXED32: ("fixed32", "long"),
        F.TYPE_FIXED64: ("fixed64", "long"),
        F.TYPE_SFIXED32: ("sfixed32", "int"),
        F.TYPE_SFIXED64: ("sfixed64", "long"),
        F.TYPE_BOOL: ("bool", "boolean"),
        F.TYPE_STRING: ("string", "string"),
        F.TYPE_BYTES: ("bytes", "binary"),
        F.TYPE_ENUM: ("enum", "string"),
        F.TYPE_MESSAGE: ("message", ""),
    }


class ProtoFile:
    """A stored Protobuf schema: its messages and enums by full name, and its first message."""

    def __init__(self, text: str) -> None:
        from logbroker.schema_registry import protobuf_type
        from logbroker.schema_registry.errors import InvalidSchema

        try:
            fd = protobuf_type.parse_stored(text)
        except InvalidSchema as e:
            raise IcebergError(f"the Protobuf schema cannot be read on its own: {e}") from None
        if not fd.message_type:
            raise IcebergError("the Protobuf schema has no message, so it has no columns")
        self.messages, self.enums = protobuf_type.messages_of(fd)
        self.proto3 = fd.syntax == "proto3"
        self.root = f".{fd.package}.{fd.message_type[0].name}" if fd.package else f".{fd.message_type[0].name}"

    def message_type(self, name: str, stack: tuple[str, ...] = ()) -> Any:
        m = self.messages.get(name)
        if m is None or m.options.map_entry or name in stack or len(stack) > MAX_DEPTH:
            return None
        fields = []
        for f in m.field:
            t = self.field_type(f, stack + (name,))
            if t is not None:
                fields.append((f.name, t))
        return ("struct", fields)

    def field_type(self, f, stack: tuple[str, ...]) -> Any:
        kind = _proto_kinds().get(f.type)
        if kind is None:
            return None  # a group
        t = self.message_type(f.type_name, stack) if kind[0] == "message" else kind[1]
        if t is None:
            return None
        return ("list", t) if f.label == f.LABEL_REPEATED else t


def merge_types(newer: Any, older: Any) -> Any:
    """The union of two column types (newer wins where they disagree, except widening)."""
    if isinstance(newer, tuple) and isinstance(older, tuple) and newer[0] == older[0] == "struct":
        fields = dict(newer[1])
        order = [n for n, _ in newer[1]]
        for name, t in older[1]:
            if name in fields:
                fields[name] = merge_types(fields[name], t)
            else:
                fields[name] = t
                order.append(name)
        return ("struct", [(n, fields[n]) for n in order])
    if isinstance(newer, tuple) and isinstance(older, tuple) and newer[0] == older[0] == "list":
        return ("list", merge_types(newer[1], older[1]))
    if isinstance(newer, str) and isinstance(older, str) and newer in _PRIMITIVE_RANK and older in _PRIMITIVE_RANK:
        return newer if _PRIMITIVE_RANK[newer] >= _PRIMITIVE_RANK[older] else older
    return newer


def schema_type(v: ValueSchema) -> Any:
    """The column type of one registered version, by its schema type."""
    if v.schema_type == "PROTOBUF":
        proto = ProtoFile(v.text)
        return proto.message_type(proto.root)
    parsed = json.loads(v.text)
    return column_type(parsed) if v.schema_type == "AVRO" else json_column_type(parsed)


def value_struct(schemas: list[ValueSchema]) -> Any:
    """The table's value struct from the subject's versions (newest first); IcebergError
    when the newest is not a record, an object or a message."""
    merged = None
    for v in schemas:
        t = schema_type(v)
        if not (isinstance(t, tuple) and t[0] == "struct"):
            if merged is None:
                raise IcebergError(
                    f"the value schema (id {v.id}) is not an Avro record, a JSON Schema object or a "
                    f"Protobuf message, so it has no columns: use iceberg.mode=key_value for this topic"
                )
            continue
        merged = t if merged is None else merge_types(merged, t)
    return merged


# --- Iceberg and Arrow types -------------------------------------------------------------


def iceberg_type(t: Any, next_id):
    from pyiceberg.types import (
        BinaryType,
        BooleanType,
        DateType,
        DoubleType,
        FloatType,
        IntegerType,
        ListType,
        LongType,
        NestedField,
        StringType,
        StructType,
        TimestamptzType,
    )

    simple = {
        "boolean": BooleanType,
        "int": IntegerType,
        "long": LongType,
        "float": FloatType,
        "double": DoubleType,
        "string": StringType,
        "binary": BinaryType,
        "date": DateType,
        "timestamp": TimestamptzType,
    }
    if isinstance(t, str):
        return simple[t]()
    if t[0] == "struct":
        return StructType(*[NestedField(next_id(), n, iceberg_type(ft, next_id), required=False) for n, ft in t[1]])
    return ListType(next_id(), iceberg_type(t[1], next_id), element_required=False)


def from_iceberg(t) -> Any:
    """The abstract type of an Iceberg type (of a table's value struct)."""
    from pyiceberg import types as it

    pairs = [
        (it.BooleanType, "boolean"),
        (it.IntegerType, "int"),
        (it.LongType, "long"),
        (it.FloatType, "float"),
        (it.DoubleType, "double"),
        (it.StringType, "string"),
        (it.BinaryType, "binary"),
        (it.DateType, "date"),
        (it.TimestamptzType, "timestamp"),
    ]
    for cls, name in pairs:
        if isinstance(t, cls):
            return name
    if isinstance(t, it.StructType):
        return ("struct", [(f.name, from_iceberg(f.field_type)) for f in t.fields])
    if isinstance(t, it.ListType):
        return ("list", from_iceberg(t.element_type))
    raise IcebergError(f"the table's value column has a type the broker does not write: {t}")


_KIND = {
    "boolean": "boolean",
    "int": "int",
    "long": "long",
    "float": "float",
    "double": "double",
    "string": "string",
    "binary": "binary",
    "date": "int",
    "timestamp": "long",
}


class ReaderTree:
    """The table's value struct in pre-order, as `_core.TableDataFiles` takes it (`value_tree`)."""

    def __init__(self, struct: Any) -> None:
        self.nodes: list[tuple[str, list[int]]] = []
        self.types: list[Any] = []
        self._add(struct)

    def _add(self, t: Any) -> int:
        i = len(self.nodes)
        self.nodes.append(("", []))
        self.types.append(t)
        if isinstance(t, str):
            self.nodes[i] = (_KIND[t], [])
        elif t[0] == "struct":
            self.nodes[i] = ("struct", [self._add(ft) for _, ft in t[1]])
        else:
            self.nodes[i] = ("list", [self._add(t[1])])
        return i


# --- writer programs ---------------------------------------------------------------------


def _fits(writer: Any, reader: Any) -> bool:
    """Whether a writer column type can fill a reader one (Avro's promotions)."""
    if isinstance(writer, str) and isinstance(reader, str):
        if writer == reader or (writer in ("string", "binary") and reader in ("string", "binary")):
            return True
        return (
            writer in _PRIMITIVE_RANK
            and reader in _PRIMITIVE_RANK
            and _PRIMITIVE_RANK[writer] <= _PRIMITIVE_RANK[reader]
        )
    if isinstance(writer, tuple) and isinstance(reader, tuple) and writer[0] == reader[0]:
        return True  # struct/list: matched part by part
    return False


def json_program(tree: ReaderTree, i: int = 0) -> tuple:
    """The program decoding JSON values into `tree` by member name (one for every JSON
    version: JSON values carry their names)."""
    kind, children = tree.nodes[i]
    if kind == "struct":
        return ("json_object", i, [(name, json_program(tree, c)) for (name, _), c in zip(tree.types[i][1], children)])
    if kind == "list":
        return ("json_array", i, json_program(tree, children[0]))
    return ("json_value", i)


def _proto_fits(writer: Any, reader: Any) -> bool:
    """Whether a Protobuf field's column type fills a reader column: as `_fits`, but bytes
    never fill a string column (they need not be UTF-8, and the wire says nothing)."""
    if isinstance(writer, tuple) and isinstance(reader, tuple) and writer[0] == reader[0] == "list":
        return _proto_fits(writer[1], reader[1])
    return _fits(writer, reader) and not (writer == "binary" and reader == "string")


def proto_program(schema_text: str, tree: ReaderTree) -> tuple:
    """The program decoding one Protobuf version's first message into `tree`."""
    proto = ProtoFile(schema_text)
    return _proto_message(proto, proto.root, 0, tree, ())


def _proto_message(proto: ProtoFile, name: str, target: int, tree: ReaderTree, stack: tuple[str, ...]) -> tuple:
    m = proto.messages[name]
    reader = tree.types[target] if target >= 0 else None
    reader_fields = dict(zip((n for n, _ in reader[1]), tree.nodes[target][1])) if target >= 0 else {}
    fields, covered = [], set()
    for f in m.field:
        kind = _proto_kinds().get(f.type)
        if kind is None:
            continue  # a group: its field is skipped by its wire type
        repeated = f.label == f.LABEL_REPEATED
        column = reader_fields.get(f.name, -1)
        wtype = proto.field_type(f, stack + (name,))
        if column >= 0 and (wtype is None or not _proto_fits(wtype, tree.types[column])):
            column = -1
        covered.add(column)
        presence = (not proto.proto3) or f.proto3_optional or f.HasField("oneof_index") or kind[0] == "message"
        extra: Any = None
        wire = kind[0]
        if wire == "enum":
            e = proto.enums.get(f.type_name)
            extra = [(v.number, v.name) for v in e.value] if e is not None else []
        elif wire == "message":
            if wtype is None:  # a map, or a message inside itself: read past as bytes
                wire = "bytes"
            else:
                item = tree.nodes[column][1][0] if repeated and column >= 0 else column
                extra = _proto_message(proto, f.type_name, item, tree, stack + (name,))
        fields.append((f.number, wire, repeated, presence, column, extra))
    missing = [c for c in (tree.nodes[target][1] if target >= 0 else []) if c not in covered]
    return ("proto_message", target, fields, missing)


def program(v: ValueSchema, tree: ReaderTree) -> tuple:
    """The program decoding the values of one registered version into `tree`."""
    if v.schema_type == "JSON":
        return json_program(tree)
    if v.schema_type == "PROTOBUF":
        return proto_program(v.text, tree)
    return avro_program(v.text, tree)


def avro_program(schema_text: str, tree: ReaderTree) -> tuple:
    """The program decoding one Avro writer schema into `tree` (the root: node 0)."""
    names: dict[str, Any] = {}
    return _compile(json.loads(schema_text), 0, tree, names, None)


def _skip_then_null(program: tuple, target: int) -> tuple:
    """Decode `program`'s datum without writing, then a null in `target`."""
    return ("record", -1, [program, ("null", target)], [])


def _compile(
    w: Any, target: int, tree: ReaderTree, names: dict[str, Any], namespace: str | None, depth: int = 0
) -> tuple:
    if depth > MAX_DEPTH:
        raise IcebergError(f"Avro schema nested deeper than {MAX_DEPTH} (a recursive type?)")
    w = _named(w, names, namespace)
    if isinstance(w, list):
        return ("union", -1, [_compile(b, target, tree, names, namespace, depth + 1) for b in w])
    wtype = column_type(w, names, namespace) if w != "null" else None
    reader = tree.types[target] if target >= 0 else None
    if target >= 0 and w != "null" and (wtype is None or not _fits(wtype, reader)):
        return _skip_then_null(_compile(w, -1, tree, names, namespace, depth + 1), target)
    primitive = {
        "null": "null",
        "boolean": "boolean",
        "int": "int",
        "long": "long",
        "float": "float",
        "double": "double",
        "bytes": "bytes",
        "string": "string",
    }
    if isinstance(w, str):
        return (primitive[w], target)
    t = w.get("type")
    if t == "long" and w.get("logicalType") == "timestamp-millis":
        return ("long", target, 1000)
    if isinstance(t, str) and t in primitive:  # {"type": "int", "logicalType": "date"} and the like
        return (primitive[t], target)
    if t == "record":
        ns = _namespace(w, namespace)
        fields = []
        covered = set()
        reader_fields = dict(zip((n for n, _ in reader[1]), tree.nodes[target][1])) if target >= 0 else {}
        for f in w.get("fields", []):
            child = reader_fields.get(f["name"], -1)
            covered.add(child)
            fields.append(_compile(f["type"], child, tree, names, ns, depth + 1))
        missing = [c for c in (tree.nodes[target][1] if target >= 0 else []) if c not in covered]
        return ("record", target, fields, missing)
    if t == "enum":
        return ("enum", target, list(w.get("symbols", [])))
    if t == "fixed":
        return ("fixed", target, int(w["size"]))
    if t == "array":
        child = tree.nodes[target][1][0] if target >= 0 else -1
        return ("array", target, _compile(w["items"], child, tree, names, namespace, depth + 1))
    if t == "map":
        child_skip = _compile(w["values"], -1, tree, names, namespace, depth + 1)
        # a map is blocks of (string key, value): an array of records of two fields
        return ("array", -1, ("record", -1, [("string", -1), child_skip], []))
    if isinstance(t, (str, list, dict)):
        return _compile(t, target, tree, names, namespace, depth + 1)
    raise IcebergError(f"Avro schema has a type the broker cannot read: {w!r}")
