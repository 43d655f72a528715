"""Columns from the registered value schema (`iceberg.mode=value_schema_id_prefix`,
logbroker/iceberg/value_schema.py and rust/src/avro_columns.rs): values written by the `avro`
package (the model) decode into the table's value struct field for field, across schema
versions; values that do not decode keep their bytes in value_raw. Then a real broker with its
registry, confluent-kafka's AvroSerializer and pyiceberg reading the table."""

from __future__ import annotations

import contextlib
import datetime
import io
import json
import struct
from pathlib import Path

import avro.io
import avro.schema
import pyarrow as pa
import pyarrow.parquet as pq

from logbroker.iceberg import value_schema as vs
from logbroker.iceberg.table_writer import ValueDecoding

V1 = {
    "type": "record",
    "name": "Click",
    "namespace": "lb.t",
    "fields": [
        {"name": "user", "type": "string"},
        {"name": "count", "type": "int"},
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["VIEW", "BUY"]}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {
            "name": "where",
            "type": [
                "null",
                {
                    "type": "record",
                    "name": "Place",
                    "fields": [{"name": "city", "type": "string"}, {"name": "lat", "type": "double"}],
                },
            ],
            "default": None,
        },
        {"name": "blob", "type": ["null", "bytes"], "default": None},
        {"name": "props", "type": {"type": "map", "values": "long"}},
        {"name": "ok", "type": "boolean"},
        {"name": "ratio", "type": "float"},
    ],
}
# v2: count widened to long, a new optional field, `props` dropped
V2 = {
    "type": "record",
    "name": "Click",
    "namespace": "lb.t",
    "fields": [
        {"name": "user", "type": "string"},
        {"name": "count", "type": "long"},
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["VIEW", "BUY"]}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "where", "type": ["null", "Place"], "default": None},
        {"name": "blob", "type": ["null", "bytes"], "default": None},
        {"name": "ok", "type": "boolean"},
        {"name": "ratio", "type": "float"},
        {"name": "referrer", "type": ["null", "string"], "default": None},
    ],
}
V2_WITH_PLACE = json.loads(json.dumps(V2))
V2_WITH_PLACE["fields"][6]["type"] = ["null", V1["fields"][6]["type"][1]]


def encode(schema: dict, schema_id: int, datum: dict) -> bytes:
    out = io.BytesIO()
    out.write(b"\x00" + struct.pack(">i", schema_id))
    avro.io.DatumWriter(avro.schema.parse(json.dumps(schema))).write(datum, avro.io.BinaryEncoder(out))
    return out.getvalue()


EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def click(i: int, v2: bool = False) -> dict:
    """A record of V1 (or V2): `at` and `day` as the logical types' Python values."""
    d = {
        "user": f"u{i}",
        "count": i * (10**10 if v2 else 1),
        "kind": "BUY" if i % 2 else "VIEW",
        "at": EPOCH + datetime.timedelta(milliseconds=1_700_000_000_000 + i),
        "day": datetime.date(1970, 1, 1) + datetime.timedelta(days=19_000 + i),
        "tags": [f"t{j}" for j in range(i % 3)],
        "where": {"city": f"c{i}", "lat": i / 4} if i % 3 else None,
        "blob": bytes([i]) if i % 2 else None,
        "ok": bool(i % 2),
        "ratio": 0.5 * i,
    }
    if v2:
        d["referrer"] = f"r{i}" if i % 2 else None
    else:
        d["props"] = {"a": i}
    return d


def decoded_rows(tmp_path: Path, dec: ValueDecoding, struct_type, values: list[bytes | None]) -> list[dict]:
    """`values` appended to a real partition log and written by the broker's table writer
    (rust/src/table/) into Parquet with the table's schema for `struct_type`, read back by
    pyarrow in offset order."""
    import pyarrow.parquet as pq

    from logbroker import _core
    from logbroker.iceberg.table_schema import table_schema, writer_arrow_schema

    log = _core.Log.create(str(tmp_path / "t-0"), "t", 0, {})
    log.append_as_leader(_core.encode_batch([(None, v, i, []) for i, v in enumerate(values)]), 0, 0)
    log.update_high_watermark(log.log_end_offset)
    schema = writer_arrow_schema(table_schema(struct_type))
    files = _core.TableDataFiles(
        schema.serialize().to_pybytes(),
        str(tmp_path / "data"),
        "test",
        "zstd",
        None,
        1 << 27,
        1 << 29,
        dec.tree.nodes,
        dec.programs,
    )
    got = files.write_log(log, 0, log.last_stable_offset(), 1 << 30)
    assert got["rows"] == len(values)
    tables = [pq.read_table(w["path"]) for w in files.close()]
    return pa.concat_tables(tables).sort_by("offset").to_pylist()


def test_values_of_two_versions_decode_into_the_grown_struct(tmp_path: Path) -> None:
    schemas = [vs.ValueSchema(2, json.dumps(V2_WITH_PLACE)), vs.ValueSchema(1, json.dumps(V1))]
    struct_type = vs.value_struct(schemas)
    names = [n for n, _ in struct_type[1]]
    assert names == ["user", "count", "kind", "at", "day", "tags", "where", "blob", "ok", "ratio", "referrer"]
    assert dict(struct_type[1])["count"] == "long" and dict(struct_type[1])["at"] == "timestamp"
    dec = ValueDecoding("t", struct_type, schemas)
    values = [encode(V1, 1, click(i)) for i in range(6)] + [encode(V2_WITH_PLACE, 2, click(i, True)) for i in range(6)]
    values += [b"not framed", None, encode(V1, 1, click(1))[:-3], encode(V1, 7, click(1))]
    rows = decoded_rows(tmp_path, dec, struct_type, values)
    for i, row in enumerate(rows[:12]):
        want = click(i % 6, v2=i >= 6)
        got = row["value"]
        assert got["user"] == want["user"] and got["count"] == want["count"] and got["kind"] == want["kind"]
        assert got["at"] == want["at"] and got["day"] == want["day"]
        assert got["tags"] == want["tags"]
        assert got["where"] == want["where"]
        assert got["blob"] == want["blob"] and got["ok"] == want["ok"] and got["ratio"] == want["ratio"]
        assert got["referrer"] == want.get("referrer")
        assert row["value_schema_id"] == (2 if i >= 6 else 1) and row["value_raw"] is None
    bad = rows[12:]
    assert [r["value"] for r in bad] == [None] * 4
    assert [r["value_raw"] for r in bad] == [b"not framed", None, values[14], values[15]]
    assert [r["value_schema_id"] for r in bad] == [None, None, 1, 7]


def test_types_without_columns_are_skipped_and_recursion_is_refused(tmp_path: Path) -> None:
    schema = {
        "type": "record",
        "name": "R",
        "fields": [
            {"name": "m", "type": {"type": "map", "values": "string"}},
            {"name": "u", "type": ["int", "string"]},
            {"name": "x", "type": "int"},
        ],
    }
    struct_type = vs.value_struct([vs.ValueSchema(3, json.dumps(schema))])
    assert struct_type == ("struct", [("x", "int")])
    dec = ValueDecoding("t", struct_type, [vs.ValueSchema(3, json.dumps(schema))])
    v = encode(schema, 3, {"m": {"k": "v"}, "u": "s", "x": 5})
    assert decoded_rows(tmp_path, dec, struct_type, [v])[0]["value"] == {"x": 5}
    linked = {
        "type": "record",
        "name": "Node",
        "fields": [{"name": "v", "type": "int"}, {"name": "next", "type": ["null", "Node"]}],
    }
    linked_v = vs.ValueSchema(4, json.dumps(linked))
    dec = ValueDecoding("t", vs.value_struct([linked_v]), [linked_v])
    assert dec.programs == []  # not compiled: its values go to value_raw, named in the log


@contextlib.contextmanager
def value_topic(tmp_path: Path, topic: str, compatibility: str | None = None, config: dict | None = None):
    """A broker with its schema registry and a 2-partition `iceberg.mode=value_schema_id_prefix`
    topic: yields (registry client, producer, value serialization context, rows), `rows()`
    being the table's rows as pyiceberg reads them ([] until the table exists)."""
    from confluent_kafka import Producer
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.serialization import MessageField, SerializationContext
    from test_iceberg_topics import catalog

    import logbroker
    from logbroker import Admin, NewTopic

    base = tmp_path / "d" / "__iceberg"
    with logbroker.Broker(
        data_dir=tmp_path / "d", schema_registry_listen="127.0.0.1:0", iceberg_commit_interval_ms=200
    ) as b:
        host, port = b.server.schema_registry_address
        sr = SchemaRegistryClient({"url": f"http://{host}:{port}"})
        with Admin(b.bootstrap_servers) as admin:
            admin.create_topics(
                [
                    NewTopic(
                        topic,
                        2,
                        1,
                        {"iceberg.enable": "true", "iceberg.mode": "value_schema_id_prefix", **(config or {})},
                    )
                ]
            )
        if compatibility is not None:
            sr.set_compatibility(f"{topic}-value", compatibility)

        def rows():
            try:
                return catalog(base).load_table(f"logbroker.{topic}").scan().to_arrow().to_pylist()
            except Exception:
                return []

        yield (
            sr,
            Producer({"bootstrap.servers": b.bootstrap_servers, "linger.ms": 5}),
            SerializationContext(topic, MessageField.VALUE),
            rows,
        )
        sr.close()


def test_broker_writes_value_columns_with_confluent_serializer(tmp_path: Path) -> None:
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from test_iceberg_topics import catalog, wait_for

    with value_topic(tmp_path, "clicks") as (sr, p, ctx, rows):
        ser1 = AvroSerializer(sr, json.dumps(V1))
        for i in range(50):
            p.produce("clicks", ser1(click(i), ctx), partition=i % 2)
        p.produce("clicks", b"raw bytes", partition=0)
        assert p.flush(30) == 0
        wait_for(lambda: len(rows()) == 51, what="the first version's records")
        ser2 = AvroSerializer(sr, json.dumps(V2_WITH_PLACE))
        for i in range(50):
            p.produce("clicks", ser2(click(i, True), ctx), partition=i % 2)
        assert p.flush(30) == 0
        got = wait_for(lambda: len(r := rows()) == 101 and r, what="the second version's records")
        table = catalog(tmp_path / "d" / "__iceberg").load_table("logbroker.clicks")
        value_fields = [f.name for f in table.schema().find_field("value").field_type.fields]
        assert "referrer" in value_fields and "props" not in value_fields
        decoded = [r for r in got if r["value"] is not None]
        assert len(decoded) == 100
        assert sorted(r["value"]["user"] for r in decoded) == sorted([f"u{i}" for i in range(50)] * 2)
        assert sorted(r["value"]["referrer"] for r in decoded if r["value"]["referrer"]) == sorted(
            f"r{i}" for i in range(50) if i % 2
        )
        assert [r["value_raw"] for r in got if r["value"] is None] == [b"raw bytes"]


def test_values_that_do_not_decode_go_to_the_dead_letter_table_once(tmp_path: Path) -> None:
    """iceberg.invalid.record.action=dlq_table: the rows stay (null value, null value_raw) and
    the bytes, offset and reason go to <table>_dlq, each once, across commits."""
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from test_iceberg_topics import catalog, wait_for

    base = tmp_path / "d" / "__iceberg"

    def dead():
        try:
            return catalog(base).load_table("logbroker.clicks_dlq").scan().to_arrow().to_pylist()
        except Exception:
            return []

    with value_topic(tmp_path, "clicks", config={"iceberg.invalid.record.action": "dlq_table"}) as (sr, p, ctx, rows):
        ser = AvroSerializer(sr, json.dumps(V1))
        bad = {0: (b"k-raw", b"raw bytes"), 1: (b"k-id", b"\x00\x00\x00\x27\x0fnot a datum")}
        for round_ in range(2):
            for i in range(10):
                p.produce("clicks", ser(click(i), ctx), key=b"k%d" % i, partition=i % 2)
            for part, (k, v) in bad.items():
                p.produce("clicks", v, key=k, partition=part)
            assert p.flush(30) == 0
            got = wait_for(lambda n=12 * (round_ + 1): len(r := rows()) == n and r, what="the table's rows")
            letters = wait_for(lambda n=2 * (round_ + 1): len(d := dead()) == n and d, what="the dead letters")
        undecoded = sorted((r["partition"], r["offset"]) for r in got if r["value"] is None)
        assert len(undecoded) == 4 and all(r["value_raw"] is None for r in got)
        assert sorted((d["partition"], d["offset"]) for d in letters) == undecoded, "each dead letter once"
        by_key = {d["key"]: d for d in letters}
        assert {d["value"] for d in letters} == {v for _, v in bad.values()}
        assert by_key[b"k-raw"]["value_schema_id"] is None and "framing" in by_key[b"k-raw"]["reason"]
        assert by_key[b"k-id"]["value_schema_id"] == 9999 and "9999" in by_key[b"k-id"]["reason"]
        assert all(d["topic"] == "clicks" and d["timestamp"] is not None for d in letters)
        assert len([r for r in got if r["value"] is not None]) == 20


def test_a_value_field_partitions_the_table(tmp_path: Path) -> None:
    """iceberg.partition.spec=bucket(8, value.user), day(timestamp): each file holds one bucket
    of the decoded field (pyiceberg's transform agrees row by row), a value that did not
    decode is in the null bucket, and a scan filtered on the field finds its rows."""
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from pyiceberg.expressions import EqualTo
    from pyiceberg.transforms import BucketTransform
    from pyiceberg.types import StringType
    from test_iceberg_topics import catalog, local_path, wait_for

    spec = {"iceberg.partition.spec": "bucket(8, value.user), day(timestamp)"}
    with value_topic(tmp_path, "clicks", config=spec) as (sr, p, ctx, rows):
        ser = AvroSerializer(sr, json.dumps(V1))
        for i in range(60):
            p.produce("clicks", ser(click(i % 15), ctx), partition=i % 2)
        p.produce("clicks", b"raw bytes", partition=1)
        assert p.flush(30) == 0
        wait_for(lambda: len(rows()) == 61, what="the table's rows")
    table = catalog(tmp_path / "d" / "__iceberg").load_table("logbroker.clicks")
    assert [(f.name, str(f.transform)) for f in table.spec().fields] == [
        ("value_user_bucket", "bucket[8]"),
        ("timestamp_day", "day"),
    ]
    bucket = BucketTransform(8).transform(StringType())
    tasks = table.scan().plan_files()
    for task in tasks:
        for r in pq.read_table(local_path(task.file.file_path)).to_pylist():
            want = None if r["value"] is None else bucket(r["value"]["user"])
            assert task.file.partition[0] == want, task.file.file_path
    scan = table.scan(row_filter=EqualTo("value.user", "u3"))
    assert sorted(r["offset"] for r in scan.to_arrow().to_pylist()) == sorted(
        r["offset"] for r in table.scan().to_arrow().to_pylist() if r["value"] and r["value"]["user"] == "u3"
    )
    assert len(scan.to_arrow()) == 4 and len(scan.plan_files()) < len(tasks)


def test_dead_letters_below_the_dead_letter_tables_position_are_not_written_again(tmp_path: Path) -> None:
    """The exactly-once rule of iceberg/dead_letters.py: a commit that wrote its dead letters
    and then lost the table's race is repeated; the repeat adds none of them again."""
    from test_iceberg_topics import catalog

    from logbroker.iceberg.catalog import CatalogSettings, load_or_create_table
    from logbroker.iceberg.dead_letters import commit_dead_letters, dead_letter_schema

    base = tmp_path / "lake"
    base.mkdir()
    cat = catalog(base)
    table = load_or_create_table(cat, CatalogSettings.from_keys({}, tmp_path), "orders")
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    schema = schema_to_pyarrow(dead_letter_schema())
    letters = pa.Table.from_pylist(
        [
            {"topic": "orders", "partition": p, "offset": o, "timestamp": None, "key": None, "value": b"x%d" % o}
            | {"value_schema_id": None, "reason": "not framed"}
            for p, o in ((0, 3), (0, 7), (1, 4))
        ],
        schema=schema,
    )
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema) as w:
        w.write_table(letters)
    ipc = sink.getvalue().to_pybytes()
    assert commit_dead_letters(cat, table, "tid", ipc, {0: 8, 1: 5}) == 3
    assert commit_dead_letters(cat, table, "tid", ipc, {0: 8, 1: 5}) == 0, "already there"
    more = pa.ipc.open_stream(ipc).read_all().slice(1)  # offsets 7 (partition 0) and 4 (1), then a new one
    more = pa.concat_tables([more, letters.slice(0, 1).set_column(2, "offset", pa.array([9], pa.int64()))])
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema) as w:
        w.write_table(more)
    assert commit_dead_letters(cat, table, "tid", sink.getvalue().to_pybytes(), {0: 10}) == 1
    rows = cat.load_table("logbroker.orders_dlq").scan().to_arrow()
    assert sorted(zip(rows.column("partition").to_pylist(), rows.column("offset").to_pylist())) == [
        (0, 3),
        (0, 7),
        (0, 9),
        (1, 4),
    ]
    # another incarnation of the topic (a new topic id) starts over
    assert commit_dead_letters(cat, table, "tid2", ipc, {0: 8, 1: 5}) == 3


J1 = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Order",
    "type": "object",
    "definitions": {"Line": {"type": "object", "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}}}},
    "properties": {
        "id": {"type": "integer"},
        "customer": {"type": ["string", "null"]},
        "total": {"type": "number"},
        "paid": {"type": "boolean"},
        "lines": {"type": "array", "items": {"$ref": "#/definitions/Line"}},
        "note": {"oneOf": [{"type": "null"}, {"type": "string"}]},
        "attrs": {"type": "object", "additionalProperties": {"type": "string"}},  # a map: no column
        "any": {},
    },
}
J2 = {
    **J1,
    "properties": {
        **J1["properties"],
        "total": {"type": "integer"},
        "ship": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def order(i: int, v2: bool = False) -> dict:
    o = {
        "id": i,
        "customer": None if i % 4 == 0 else f"c{i}",
        "total": i * 2 if v2 else i + 0.5,
        "paid": i % 2 == 0,
        "lines": [{"sku": f"s{j}", "qty": j} for j in range(i % 3)],
        "attrs": {"k": "v"},
        "any": [i],
    }
    if i % 5:
        o["note"] = f"n{i}"
    if v2:
        o["ship"] = {"city": f"city{i}"}
    return o


def json_framed(schema_id: int, obj) -> bytes:
    return b"\x00" + struct.pack(">i", schema_id) + json.dumps(obj).encode()


def test_json_schema_values_decode_by_name_across_versions(tmp_path: Path) -> None:
    """JSON Schema versions: their properties become the value struct (integer long, number
    double, $ref and oneOf-with-null followed, maps and untyped members left out); values
    written by json.dumps (the model) decode member by member, and what does not fit (a
    string for the long `id`, an array for the object) stays raw."""
    schemas = [vs.ValueSchema(6, json.dumps(J2), "JSON"), vs.ValueSchema(5, json.dumps(J1), "JSON")]
    struct_type = vs.value_struct(schemas)
    # v2 narrows `total` to integer: the table keeps v1's wider double
    assert struct_type == (
        "struct",
        [
            ("id", "long"),
            ("customer", "string"),
            ("total", "double"),
            ("paid", "boolean"),
            ("lines", ("list", ("struct", [("sku", "string"), ("qty", "long")]))),
            ("note", "string"),
            ("ship", ("struct", [("city", "string")])),
        ],
    )
    dec = ValueDecoding("t", struct_type, schemas)
    objs = [order(i) for i in range(7)] + [order(i, True) for i in range(7, 12)]
    values = [json_framed(5 if i < 7 else 6, o) for i, o in enumerate(objs)]
    values += [json_framed(5, {"id": "seven"}), json_framed(5, [1, 2]), b"\x00\x00\x00\x00\x05{bad", None]
    rows = decoded_rows(tmp_path, dec, struct_type, values)

    def expected(o: dict) -> dict:
        return {
            "id": o["id"],
            "customer": o["customer"],
            "total": float(o["total"]),
            "paid": o["paid"],
            "lines": o["lines"],
            "note": o.get("note"),
            "ship": o.get("ship"),
        }

    assert [r["value"] for r in rows[:12]] == [expected(o) for o in objs]
    assert all(r["value_raw"] is None for r in rows[:12])
    assert [r["value"] for r in rows[12:]] == [None] * 4
    assert [r["value_raw"] for r in rows[12:15]] == values[12:15]
    assert [r["value_schema_id"] for r in rows[12:]] == [5, 5, 5, None]


def test_broker_writes_json_schema_values_with_confluent_serializer(tmp_path: Path) -> None:
    from confluent_kafka.schema_registry.json_schema import JSONSerializer
    from test_iceberg_topics import catalog, wait_for

    # v2 narrows `total` to integer: compatibility NONE
    with value_topic(tmp_path, "orders", compatibility="NONE") as (sr, p, ctx, rows):
        ser1 = JSONSerializer(json.dumps(J1), sr)
        for i in range(40):
            p.produce("orders", ser1(order(i), ctx), partition=i % 2)
        assert p.flush(30) == 0
        wait_for(lambda: len(rows()) == 40, what="the first version's records")
        ser2 = JSONSerializer(json.dumps(J2), sr)
        for i in range(40, 80):
            p.produce("orders", ser2(order(i, True), ctx), partition=i % 2)
        assert p.flush(30) == 0
        got = wait_for(lambda: len(r := rows()) == 80 and r, what="the second version's records")
        table = catalog(tmp_path / "d" / "__iceberg").load_table("logbroker.orders")
        assert [f.name for f in table.schema().find_field("value").field_type.fields] == [
            "id",
            "customer",
            "total",
            "paid",
            "lines",
            "note",
            "ship",
        ]
        by_id = {r["value"]["id"]: r["value"] for r in got}
        assert sorted(by_id) == list(range(80))
        assert by_id[5]["lines"] == [{"sku": "s0", "qty": 0}, {"sku": "s1", "qty": 1}] and by_id[3]["lines"] == []
        assert by_id[41]["total"] == 82.0 and by_id[41]["ship"] == {"city": "city41"}
        assert by_id[1]["ship"] is None and by_id[1]["total"] == 1.5 and by_id[0]["customer"] is None
        assert all(r["value_raw"] is None for r in got)


ORDER_PROTO = """syntax = "proto3";
package lb.iceberg;
import "google/protobuf/timestamp.proto";
message Order {
  int64 id = 1;
  repeated sint32 deltas = 2;
  Kind kind = 3;
  optional string note = 4;
  repeated Line lines = 5;
  map<string, string> attrs = 6;
  google.protobuf.Timestamp at = 7;
  double total = 8;
  bool paid = 9;
  bytes blob = 10;
  oneof pay {
    string card = 11;
    uint64 cash = 12;
  }
  message Line {
    string sku = 1;
    int32 qty = 2;
  }
  enum Kind {
    VIEW = 0;
    BUY = 1;
  }
}
message Other {
  string x = 1;
}
"""
ORDER_PROTO_V2 = ORDER_PROTO.replace("  bytes blob = 10;\n", "  bytes blob = 10;\n  string referrer = 13;\n")


def order_class(text: str, name: str = "Order", package: str = "lb.iceberg"):
    """The message class of a schema, as the registry stores it (its descriptor, built here)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2

    from logbroker.schema_registry import protobuf_type

    fd = protobuf_type.parse_stored(protobuf_type.stored_form(text))
    fd.name = f"order{abs(hash(text))}.proto"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(descriptor_pb2.FileDescriptorProto.FromString(timestamp_pb2.DESCRIPTOR.serialized_pb))
    pool.Add(fd)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{package}.{name}"))


def proto_order(cls, i: int, v2: bool = False):
    m = cls(id=i, deltas=[i, -i, 3], kind=i % 2, total=i / 4, paid=i % 3 == 0, blob=bytes([i]) * (i % 2))
    if i % 4:
        m.note = f"n{i}"
    for j in range(i % 3):
        m.lines.add(sku=f"s{j}", qty=j - 1)
    m.attrs["k"] = "v"
    if i % 5:
        m.at.seconds, m.at.nanos = 1_700_000_000 + i, i
    if i % 2:
        m.card = f"card{i}"
    elif i % 4 == 0:
        m.cash = 2**63 + i  # past 2^63: wraps, as documented
    if v2:
        m.referrer = f"r{i}"
    return m


def expected_order(m, v2: bool) -> dict:
    kind = m.DESCRIPTOR.enum_types_by_name["Kind"].values_by_number[m.kind].name
    which = m.WhichOneof("pay")
    return {
        "id": m.id,
        "deltas": list(m.deltas),
        "kind": kind,
        "note": m.note if m.HasField("note") else None,
        "lines": [{"sku": ln.sku, "qty": ln.qty} for ln in m.lines],
        "at": {"seconds": m.at.seconds, "nanos": m.at.nanos} if m.HasField("at") else None,
        "total": m.total,
        "paid": m.paid,
        "blob": m.blob,
        "card": m.card if which == "card" else None,
        "cash": (m.cash - 2**64 if m.cash >= 2**63 else m.cash) if which == "cash" else None,
        "referrer": m.referrer if v2 else None,
    }


def test_protobuf_values_decode_by_field_number_across_versions(tmp_path: Path) -> None:
    """Protobuf versions: the first message's fields become the value struct (maps left out,
    a well-known Timestamp a struct); values serialized by the protobuf runtime (the model)
    decode field for field, with proto3's defaults for absent scalars and null for absent
    fields with presence; another message of the file and a truncated value stay raw."""
    from logbroker.schema_registry import protobuf_type

    v1, v2 = protobuf_type.stored_form(ORDER_PROTO), protobuf_type.stored_form(ORDER_PROTO_V2)
    schemas = [vs.ValueSchema(9, v2, "PROTOBUF"), vs.ValueSchema(8, v1, "PROTOBUF")]
    struct_type = vs.value_struct(schemas)
    assert sorted(n for n, _ in struct_type[1]) == sorted(
        ["id", "deltas", "kind", "note", "lines", "at", "total", "paid", "blob", "card", "cash", "referrer"]
    )
    assert dict(struct_type[1])["at"] == ("struct", [("seconds", "long"), ("nanos", "int")])
    dec = ValueDecoding("t", struct_type, schemas)
    c1, c2 = order_class(ORDER_PROTO), order_class(ORDER_PROTO_V2)
    msgs = [(proto_order(c1, i), False) for i in range(8)] + [(proto_order(c2, i, True), True) for i in range(8, 12)]
    values = [b"\x00" + struct.pack(">i", 8 if not v else 9) + b"\x00" + m.SerializeToString() for m, v in msgs]
    other = order_class(ORDER_PROTO, "Other")(x="y").SerializeToString()
    values += [b"\x00" + struct.pack(">i", 8) + b"\x02\x02" + other, values[3][:-2]]
    rows = decoded_rows(tmp_path, dec, struct_type, values)
    assert [r["value"] for r in rows[:12]] == [expected_order(m, v) for m, v in msgs]
    assert [r["value"] for r in rows[12:]] == [None, None]
    assert [r["value_raw"] for r in rows[12:]] == values[12:]


def test_broker_writes_protobuf_values_with_confluent_serializer(tmp_path: Path) -> None:
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from test_iceberg_topics import wait_for

    with value_topic(tmp_path, "porders") as (sr, p, ctx, rows):
        sent = []
        for text, v2, ids in ((ORDER_PROTO, False, range(30)), (ORDER_PROTO_V2, True, range(30, 60))):
            cls = order_class(text)
            ser = ProtobufSerializer(cls, sr, {"use.deprecated.format": False})
            for i in ids:
                m = proto_order(cls, i, v2)
                sent.append(expected_order(m, v2))
                p.produce("porders", ser(m, ctx), partition=i % 2)
            assert p.flush(30) == 0

        got = wait_for(
            lambda: len(r := rows()) == 60 and all(x["value"] is not None for x in r) and r,
            what="both versions' records decoded",
        )
        assert [r["value"] for r in sorted(got, key=lambda r: r["value"]["id"])] == sent
        assert sr.get_versions("porders-value") == [1, 2]


def test_keys_registered_under_topic_key_are_decoded_beside_the_raw_key(tmp_path: Path) -> None:
    """A schema registered under `<topic>-key` adds `key_struct` and `key_schema_id` to the
    table (the raw `key` stays): keys framed with it decode into the struct, the rows written
    before the columns existed and keys that are not framed read null there."""
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext
    from test_iceberg_topics import catalog, wait_for

    key_schema = {
        "type": "record",
        "name": "ClickKey",
        "namespace": "lb.t",
        "fields": [{"name": "user", "type": "string"}, {"name": "n", "type": "int"}],
    }
    with value_topic(tmp_path, "keyed") as (sr, p, ctx, rows):
        ser = AvroSerializer(sr, json.dumps(V1))
        for i in range(10):
            p.produce("keyed", ser(click(i), ctx), key=f"plain-{i}".encode(), partition=i % 2)
        assert p.flush(30) == 0
        wait_for(lambda: len(rows()) == 10, what="the records before any key schema")
        table = catalog(tmp_path / "d" / "__iceberg").load_table("logbroker.keyed")
        assert "key_struct" not in [f.name for f in table.schema().fields]
        keys = AvroSerializer(sr, json.dumps(key_schema))
        key_ctx = SerializationContext("keyed", MessageField.KEY)
        framed = {}
        for i in range(10, 30):
            framed[i] = keys({"user": f"u{i}", "n": i}, key_ctx)
            p.produce("keyed", ser(click(i), ctx), key=framed[i], partition=i % 2)
        p.produce("keyed", ser(click(30), ctx), key=b"not framed", partition=0)
        assert p.flush(30) == 0
        got = wait_for(lambda: len(r := rows()) == 31 and r, what="the keyed records")
        table = catalog(tmp_path / "d" / "__iceberg").load_table("logbroker.keyed")
        names = [f.name for f in table.schema().fields]
        assert names[-2:] == ["key_struct", "key_schema_id"], names
        key_id = sr.get_latest_version("keyed-key").schema_id
        by_user = {r["value"]["user"]: r for r in got}
        for i in range(10, 30):
            r = by_user[f"u{i}"]
            assert r["key_struct"] == {"user": f"u{i}", "n": i} and r["key_schema_id"] == key_id
            assert r["key"] == framed[i]  # the raw key stays, as the tier and upsert read it
        for i in range(10):
            r = by_user[f"u{i}"]
            assert r["key_struct"] is None and r["key"] == f"plain-{i}".encode()
        r = by_user["u30"]
        assert r["key_struct"] is None and r["key_schema_id"] is None and r["key"] == b"not framed"
