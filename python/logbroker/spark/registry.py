"""Schema-registry columns for the Spark source: `value.format=registry` (and
`key.format=registry`) reads Confluent-framed Avro, JSON Schema and Protobuf values (keys)
as a struct column, decoded in Rust by the decoders Iceberg topics use
(`_core.decode_registry_values`; rust/src/avro_columns.rs, json_columns.rs,
proto_columns.rs), so a PySpark job needs no `from_avro` and no hand-stripped framing.

    df = (spark.read.format("logbroker")
          .option("bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "orders")
          .option("value.format", "registry")
          .option("schema.registry.url", "http://127.0.0.1:8081")
          .load())
    df.select("value.id", "value.amount")

The column's struct is the union of every version registered under the subject
(`<topic>-value`, `<topic>-key`, or `value.subject` / `key.subject`), as an Iceberg
topic's table has it (logbroker/iceberg/value_schema.py: newest type of a field, widened by
Avro's promotions; every field nullable). Beside it, `value_schema_id` (int, null when the
value is not framed) and `value_raw` (binary: the bytes of a value that did not decode,
else null), `key_schema_id` and `key_raw` for keys. `mode`: PERMISSIVE (the default: such a
value is a null struct with its bytes in `value_raw`) or FAILFAST (the read fails naming the
topic, partition, offset and why).

Evolution: the struct is read from the registry when the query is planned (a streaming
query's schema is fixed while it runs, as Spark's are). Each batch (each micro-batch) is
planned with every version registered by then, so the values of a version registered
later decode into the struct's fields that version shares, and its new fields appear when
the query is started again.

Registry settings: `schema.registry.url` (required), `schema.registry.basic.auth.user.info`
(`user:password`, HTTP basic), and for https `schema.registry.ssl.ca.location`.

The sink (logbroker/spark/sink.py) does the reverse with `value.format=registry` /
`key.format=registry`: a struct column is written as Avro in Confluent's framing (Rust,
`_core.encode_registry_values`; rust/src/avro_encode.rs), with a writer schema made from the
column's type (`avro_schema`: a record of its fields, each `["null", T]` with a null default)
and registered under the subject on the driver, which gives the id the executors frame with.
"""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from logbroker import _core
from logbroker.iceberg import IcebergError
from logbroker.iceberg import value_schema as vs
from logbroker.spark.kafka_io import SparkSourceError

FORMATS = ("binary", "registry")
MODES = ("PERMISSIVE", "FAILFAST")
TIMEOUT_S = 30.0

_DDL = {
    "boolean": "boolean",
    "int": "int",
    "long": "bigint",
    "float": "float",
    "double": "double",
    "string": "string",
    "binary": "binary",
    "date": "date",
    "timestamp": "timestamp",
}


def spark_ddl(t: Any) -> str:
    """Spark's DDL for an abstract column type (value_schema.py)."""
    if isinstance(t, str):
        return _DDL[t]
    if t[0] == "struct":
        return "struct<" + ", ".join(f"`{n.replace('`', '``')}`: {spark_ddl(ft)}" for n, ft in t[1]) + ">"
    return f"array<{spark_ddl(t[1])}>"


class Registry:
    """The registry's REST API, as the Spark driver reads it (plain data: picklable)."""

    def __init__(self, url: str, user_info: str | None = None, ca_location: str | None = None) -> None:
        self.url = url.rstrip("/")
        self.user_info = user_info
        self.ca_location = ca_location

    def _request(self, method: str, path: str, body: dict | None = None) -> Any:
        """One call of the REST API: the answer's JSON, or SparkSourceError naming the call
        and what the registry said."""
        req = urllib.request.Request(
            self.url + path,
            data=None if body is None else json.dumps(body).encode(),
            method=method,
            headers={
                "Accept": "application/vnd.schemaregistry.v1+json",
                "Content-Type": "application/vnd.schemaregistry.v1+json",
            },
        )
        if self.user_info:
            req.add_header("Authorization", "Basic " + base64.b64encode(self.user_info.encode()).decode())
        context = ssl.create_default_context(cafile=self.ca_location) if self.url.startswith("https") else None
        try:
            with urllib.request.urlopen(req, timeout=TIMEOUT_S, context=context) as resp:
                return json.load(resp)
        except urllib.error.HTTPError as e:
            text = e.read().decode(errors="replace")[:500]
            raise SparkSourceError(f"schema registry {self.url}: {method} {path} answered {e.code}: {text}") from None
        except (urllib.error.URLError, OSError) as e:
            raise SparkSourceError(f"schema registry {self.url}: {method} {path} failed: {e}") from None

    def _get(self, path: str) -> Any:
        return self._request("GET", path)

    def register(self, subject: str, schema: dict | str, schema_type: str = "AVRO") -> int:
        """Registers a schema (Avro or JSON Schema as a dict, a Protobuf file as text) under
        `subject` (the id of an identical version if there is one); the registry refuses an
        incompatible one, named in the error."""
        quoted = urllib.parse.quote(subject, safe="")
        body = {"schema": schema if isinstance(schema, str) else json.dumps(schema)}
        if schema_type != "AVRO":
            body["schemaType"] = schema_type
        return int(self._request("POST", f"/subjects/{quoted}/versions", body)["id"])

    def versions(self, subject: str) -> list[vs.ValueSchema]:
        """Every version under `subject`, soft-deleted ones too (records may still carry
        their ids), newest first; [] when the subject has none."""
        quoted = urllib.parse.quote(subject, safe="")
        try:
            numbers = self._get(f"/subjects/{quoted}/versions?deleted=true")
        except SparkSourceError as e:
            if " answered 404" in str(e):
                return []
            raise
        out = []
        for n in sorted(numbers, reverse=True):
            v = self._get(f"/subjects/{quoted}/versions/{n}?deleted=true")
            out.append(vs.ValueSchema(int(v["id"]), v["schema"], v.get("schemaType", "AVRO")))
        return out


class Column:
    """One registry-decoded column (`value` or `key`): its struct, fixed when the query is
    planned, and the programs of the subject's versions (plain data: picklable)."""

    def __init__(self, name: str, subject: str, struct: Any) -> None:
        self.name = name  # "value" or "key"
        self.subject = subject
        self.struct = struct
        self.tree = vs.ReaderTree(struct)
        self.programs: list[tuple[int, tuple]] = []
        self.skipped: dict[int, str] = {}  # schema id -> why its values cannot be read

    @classmethod
    def plan(cls, name: str, subject: str, registry: Registry) -> Column:
        versions = registry.versions(subject)
        if not versions:
            raise SparkSourceError(
                f"{name}.format=registry: subject {subject!r} has no schema in the registry at {registry.url}"
            )
        try:
            struct = vs.value_struct(versions)
        except IcebergError as e:
            raise SparkSourceError(f"{name}.format=registry, subject {subject!r}: {e}") from None
        if struct is None:
            raise SparkSourceError(
                f"{name}.format=registry: no version of subject {subject!r} is an Avro record, a JSON Schema "
                "object or a Protobuf message"
            )
        column = cls(name, subject, struct)
        column.compile(versions)
        return column

    def compile(self, versions: list[vs.ValueSchema]) -> None:
        """Programs for `versions` into the fixed struct (a version's fields the struct does
        not have are skipped; a version that cannot be read at all leaves its values raw)."""
        self.programs, self.skipped = [], {}
        for v in versions:
            try:
                self.programs.append((v.id, vs.program(v, self.tree)))
            except (IcebergError, ValueError, KeyError, TypeError) as e:
                self.skipped[v.id] = str(e)

    def refresh(self, registry: Registry) -> None:
        """The versions registered since (each batch's plan)."""
        self.compile(registry.versions(self.subject))

    def extra_ddl(self) -> str:
        """The columns beside the struct: its schema id and the raw bytes of what did not decode."""
        return f"{self.name}_schema_id int, {self.name}_raw binary"

    def decode(self, binary, arrow_schema, fail_fast: bool, where: tuple[str, int, Any]):
        """The three columns (struct, schema id, raw) of a pyarrow binary array, as arrays
        of `arrow_schema`'s fields of those names. `where`: (topic, partition, the offsets
        array) for FAILFAST's error."""
        import pyarrow as pa

        names = (self.name, f"{self.name}_schema_id", f"{self.name}_raw")
        schema = pa.schema([arrow_schema.field(n) for n in names])
        binary = binary.cast(pa.binary()) if binary.type != pa.binary() else binary
        validity, offsets, data = binary.buffers()
        n = len(binary)
        if binary.offset:  # a slice: its own buffers from the start
            binary = pa.concat_arrays([binary])
            validity, offsets, data = binary.buffers()
        ipc, failures, first = _core.decode_registry_values(
            n,
            validity if validity is not None and binary.null_count else b"\xff" * ((n + 7) // 8),
            offsets,
            data if data is not None else b"",
            schema.serialize(),
            self.tree.nodes,
            self.programs,
        )
        if failures and fail_fast and first is not None:
            topic, partition, offsets_array = where
            row, why = first
            raise SparkSourceError(
                f"{topic}-{partition} offset {offsets_array[row].as_py()}: the {self.name} does not decode "
                f"(subject {self.subject!r}, mode=FAILFAST): {why}"
            )
        batch = pa.ipc.open_stream(ipc).read_next_batch()
        return [batch.column(i) for i in range(3)]


def _avro_name(text: str) -> str:
    out = "".join(c if c.isalnum() or c == "_" else "_" for c in text)
    return out if out and not out[0].isdigit() else f"_{out}"


def _scalar_kind(t) -> str | None:
    """The kind of a scalar Arrow type the registry encoders write (rust/src/avro_encode.rs
    `is_scalar`), or None for a struct, a list or a type they do not write."""
    import pyarrow as pa

    checks = (
        (pa.types.is_boolean, "boolean"),
        (lambda t: pa.types.is_int8(t) or pa.types.is_int16(t) or pa.types.is_int32(t), "int"),
        (pa.types.is_int64, "long"),
        (pa.types.is_float32, "float"),
        (pa.types.is_float64, "double"),
        (lambda t: pa.types.is_string(t) or pa.types.is_large_string(t), "string"),
        (lambda t: pa.types.is_binary(t) or pa.types.is_large_binary(t), "bytes"),
        (pa.types.is_date32, "date"),
        (lambda t: pa.types.is_timestamp(t) and t.tz is not None, "timestamp"),
        (pa.types.is_timestamp, "local_timestamp"),
    )
    return next((kind for check, kind in checks if check(t)), None)


# Avro's name of each kind is the kind's own (boolean, int, long, float, double, string, bytes) but these:
_AVRO_SCALARS = {
    "date": {"type": "int", "logicalType": "date"},
    "timestamp": {"type": "long", "logicalType": "timestamp-micros"},
    "local_timestamp": {"type": "long", "logicalType": "local-timestamp-micros"},
}
_JSON_SCALARS = {
    "boolean": {"type": "boolean"},
    "int": {"type": "integer"},
    "long": {"type": "integer"},
    "float": {"type": "number"},
    "double": {"type": "number"},
    "string": {"type": "string"},
    "bytes": {"type": "string", "contentEncoding": "base64"},
    "date": {"type": "string", "format": "date"},
    "timestamp": {"type": "string", "format": "date-time"},
    "local_timestamp": {"type": "string"},
}
_PROTO_SCALARS = {
    "boolean": "bool",
    "int": "int32",
    "long": "int64",
    "float": "float",
    "double": "double",
    "string": "string",
    "bytes": "bytes",
    "date": "int32",
    "timestamp": "google.protobuf.Timestamp",
    "local_timestamp": "google.protobuf.Timestamp",
}


def avro_schema(arrow_type, name: str, namespace: str = "logbroker.spark") -> dict:
    """The Avro writer schema of a struct column (rust/src/avro_encode.rs encodes by the same
    rules): a record named `name`, every field `["null", T]` defaulting to null."""
    import pyarrow as pa

    def typ(t, path: str):
        kind = _scalar_kind(t)
        if kind is not None:
            return _AVRO_SCALARS.get(kind, kind)
        if pa.types.is_struct(t):
            return record(t, path)
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            return {"type": "array", "items": ["null", typ(t.value_type, path + "_item")]}
        raise SparkSourceError(f"field {path}: the registry sink cannot write Spark/Arrow type {t} as Avro")

    def record(t, path: str) -> dict:
        fields = []
        for i in range(t.num_fields):
            f = t.field(i)
            fields.append(
                {"name": _avro_name(f.name), "type": ["null", typ(f.type, f"{path}_{f.name}")], "default": None}
            )
        return {"type": "record", "name": _avro_name(path), "fields": fields}

    if not pa.types.is_struct(arrow_type):
        raise SparkSourceError(f"{name}.format=registry writes a struct column; {name} is {arrow_type}")
    out = record(arrow_type, name)
    out["namespace"] = namespace
    return out


def json_schema(arrow_type, title: str) -> dict:
    """The JSON Schema of a struct column (rust/src/json_encode.rs writes by the same rules):
    an object of the struct's fields, each `oneOf` null and its type."""
    import pyarrow as pa

    def typ(t, path: str) -> dict:
        kind = _scalar_kind(t)
        if kind is not None:
            return dict(_JSON_SCALARS[kind])
        if pa.types.is_struct(t):
            return obj(t, path)
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            return {"type": "array", "items": nullable(t.value_type, path + "[]")}
        raise SparkSourceError(f"field {path}: the registry sink cannot write Spark/Arrow type {t} as JSON")

    def nullable(t, path: str) -> dict:
        return {"oneOf": [{"type": "null"}, typ(t, path)]}

    def obj(t, path: str) -> dict:
        props = {t.field(i).name: nullable(t.field(i).type, f"{path}.{t.field(i).name}") for i in range(t.num_fields)}
        return {"type": "object", "properties": props}

    if not pa.types.is_struct(arrow_type):
        raise SparkSourceError(f"a registry column must be a struct; this one is {arrow_type}")
    return {"$schema": "http://json-schema.org/draft-07/schema#", "title": title, **obj(arrow_type, title)}


def proto_schema(arrow_type, name: str, package: str = "logbroker.spark") -> str:
    """The proto3 file of a struct column (rust/src/proto_encode.rs writes by the same rules):
    message `name` with the struct's fields numbered 1, 2, ... in order, scalars `optional`,
    nested structs as nested messages, lists `repeated`, timestamps google.protobuf.Timestamp."""
    import pyarrow as pa

    needs_timestamp = False

    def scalar(t, path: str) -> str | None:
        nonlocal needs_timestamp
        kind = _scalar_kind(t)
        needs_timestamp = needs_timestamp or kind in ("timestamp", "local_timestamp")
        return None if kind is None else _PROTO_SCALARS[kind]

    def message(t, msg: str, path: str, indent: str) -> list[str]:
        lines = [f"{indent}message {msg} {{"]
        nested: list[str] = []
        for i in range(t.num_fields):
            f = t.field(i)
            fname, fpath = _avro_name(f.name), f"{path}.{f.name}"
            ft, label = f.type, "optional "
            if pa.types.is_list(ft) or pa.types.is_large_list(ft):
                ft, label = ft.value_type, "repeated "
                if pa.types.is_list(ft) or pa.types.is_large_list(ft):
                    raise SparkSourceError(f"field {fpath}: a list of lists has no Protobuf form")
            kind = scalar(ft, fpath)
            if kind is None and pa.types.is_struct(ft):
                kind = f"{fname[0].upper()}{fname[1:]}Message"
                nested += message(ft, kind, fpath, indent + "  ")
            elif kind is None:
                raise SparkSourceError(
                    f"field {fpath}: the registry sink cannot write Spark/Arrow type {ft} as Protobuf"
                )
            if label == "optional " and (kind.endswith("Message") or kind == "google.protobuf.Timestamp"):
                label = ""  # a message field has presence already
            lines.append(f"{indent}  {label}{kind} {fname} = {i + 1};")
        return lines + nested + [f"{indent}}}"]

    if not pa.types.is_struct(arrow_type):
        raise SparkSourceError(f"a registry column must be a struct; this one is {arrow_type}")
    body = message(arrow_type, _avro_name(name), name, "")
    head = ['syntax = "proto3";', f"package {package};"]
    if needs_timestamp:
        head.append('import "google/protobuf/timestamp.proto";')
    return "\n".join(head + [""] + body) + "\n"


SCHEMA_TYPES = {"avro": "AVRO", "json": "JSON", "protobuf": "PROTOBUF"}


class SinkColumn:
    """A struct column the sink writes as registry-framed Avro, JSON or Protobuf (plain data:
    picklable)."""

    def __init__(self, name: str, arrow_type, schema_id: int, schema_type: str = "avro") -> None:
        self.name = name
        self.arrow_type = arrow_type
        self.schema_id = schema_id
        self.schema_type = schema_type

    @classmethod
    def plan(cls, o: dict, schema, topic: str | None) -> list[SinkColumn]:
        """Driver side: the registry columns of a write, each schema registered."""
        from pyspark.sql.pandas.types import to_arrow_type

        names = registry_names(o)
        if not names:
            return []
        registry = registry_of(o, names)
        out = []
        for name in names:
            if name not in schema.fieldNames():
                raise SparkSourceError(f"{name}.format=registry: the DataFrame has no {name} column")
            subject = o.get(f"{name}.subject") or (f"{topic}-{name}" if topic else None)
            if subject is None:
                raise SparkSourceError(f"{name}.format=registry needs the topic option or option {name}.subject")
            arrow_type = to_arrow_type(schema[name].dataType, timezone="UTC")
            kind = o.get(f"{name}.schema.type", "avro").lower()
            if kind not in SCHEMA_TYPES:
                raise SparkSourceError(f"option {name}.schema.type is {kind!r}: avro, json or protobuf")
            record_name = o.get(f"{name}.avro.name") or o.get(f"{name}.schema.name") or _avro_name(f"{subject}")
            if kind == "avro":
                text: dict | str = avro_schema(arrow_type, record_name)
            elif kind == "json":
                text = json_schema(arrow_type, record_name)
            else:
                text = proto_schema(arrow_type, record_name)
            out.append(cls(name, arrow_type, registry.register(subject, text, SCHEMA_TYPES[kind]), kind))
        return out

    def encode(self, values: list) -> list:
        """Executor side: the framed bytes of each row's struct (a dict, or None: None)."""
        import pyarrow as pa

        if _has_timestamp(self.arrow_type):
            # PySpark hands a timestamp over as the worker's local time, without a zone
            values = [_aware(v) for v in values]
        arr = pa.array(values, type=self.arrow_type)
        sink = pa.BufferOutputStream()
        batch = pa.RecordBatch.from_arrays([arr], names=[self.name])
        with pa.ipc.new_stream(sink, batch.schema) as w:
            w.write_batch(batch)
        validity, offsets, data, nulls = _core.encode_registry_values(sink.getvalue(), self.schema_id, self.schema_type)
        n = len(values)
        out = pa.Array.from_buffers(
            pa.binary(),
            n,
            [pa.py_buffer(validity) if nulls else None, pa.py_buffer(offsets), pa.py_buffer(data)],
            null_count=nulls,
        )
        return out.to_pylist()


def _has_timestamp(t) -> bool:
    import pyarrow as pa

    if pa.types.is_timestamp(t):
        return True
    if pa.types.is_struct(t):
        return any(_has_timestamp(t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _has_timestamp(t.value_type)
    return False


def _aware(v):
    """`v` with every naive datetime read as local time (as PySpark made it) and made aware."""
    import datetime

    if isinstance(v, datetime.datetime):
        return v.astimezone(datetime.UTC) if v.tzinfo is None else v
    if isinstance(v, dict):
        return {k: _aware(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_aware(x) for x in v]
    return v


def from_spark(dt) -> Any:
    """The abstract column type (value_schema.py) of a Spark type this module made."""
    from pyspark.sql import types as st

    simple = [
        (st.BooleanType, "boolean"),
        (st.IntegerType, "int"),
        (st.LongType, "long"),
        (st.FloatType, "float"),
        (st.DoubleType, "double"),
        (st.StringType, "string"),
        (st.BinaryType, "binary"),
        (st.DateType, "date"),
        (st.TimestampType, "timestamp"),
    ]
    for cls, name in simple:
        if isinstance(dt, cls):
            return name
    if isinstance(dt, st.StructType):
        return ("struct", [(f.name, from_spark(f.dataType)) for f in dt.fields])
    if isinstance(dt, st.ArrayType):
        return ("list", from_spark(dt.elementType))
    raise SparkSourceError(f"a registry column cannot hold Spark type {dt.simpleString()}")


def registry_names(o: dict) -> list[str]:
    """The columns (`key`, `value`) whose `<name>.format` is `registry`."""
    names = []
    for name in ("key", "value"):
        fmt = str(o.get(f"{name}.format", "binary")).lower()
        if fmt not in FORMATS:
            raise SparkSourceError(f"{name}.format must be one of {', '.join(FORMATS)}, not {fmt!r}")
        if fmt == "registry":
            names.append(name)
    return names


def registry_of(o: dict, names: list[str]) -> Registry:
    url = o.get("schema.registry.url")
    if not url:
        raise SparkSourceError(f"{names[0]}.format=registry needs option schema.registry.url")
    return Registry(url, o.get("schema.registry.basic.auth.user.info"), o.get("schema.registry.ssl.ca.location"))


class RegistryOptions:
    """The registry columns a read asks for (lower-cased options; plain data: picklable)."""

    def __init__(self, o: dict, topics: list[str] | None) -> None:
        self.mode = str(o.get("mode", "PERMISSIVE")).upper()
        if self.mode not in MODES:
            raise SparkSourceError(f"mode must be one of {', '.join(MODES)}, not {self.mode!r}")
        self.names = registry_names(o)
        self.subjects: dict[str, str] = {}
        self.registry = registry_of(o, self.names) if self.names else None
        for name in self.names:
            subject = o.get(f"{name}.subject")
            if not subject:
                if not topics or len(topics) != 1:
                    raise SparkSourceError(
                        f"{name}.format=registry reads one topic's subject (<topic>-{name}): subscribe to one "
                        f"topic or assign one, or name the subject with option {name}.subject"
                    )
                subject = f"{topics[0]}-{name}"
            self.subjects[name] = subject

    @property
    def fail_fast(self) -> bool:
        return self.mode == "FAILFAST"

    def plan(self) -> list[Column]:
        """The columns as the registry has them now (the source's schema)."""
        assert self.registry is not None or not self.names
        return [Column.plan(n, self.subjects[n], self.registry) for n in self.names]  # type: ignore[arg-type]

    def ddl(self, base_columns: list[str], columns: list[Column]) -> str:
        """The source's schema: Spark's Kafka columns with key/value as structs, the schema
        id and raw columns after them."""
        structs = {c.name: spark_ddl(c.struct) for c in columns}
        out = [
            (f"{col.split()[0]} {structs[col.split()[0]]}" if col.split()[0] in structs else col)
            for col in base_columns
        ]
        return ", ".join(out + [c.extra_ddl() for c in columns])

    def from_schema(self, schema) -> list[Column]:
        """The columns of a schema `ddl` made (readers: the struct is the query's)."""
        return [Column(n, self.subjects[n], from_spark(schema[n].dataType)) for n in self.names]
