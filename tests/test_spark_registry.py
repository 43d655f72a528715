"""The Spark source's registry columns (logbroker/spark/registry.py): `value.format=registry`
and `key.format=registry` read Confluent-framed Avro, JSON Schema and Protobuf values (and
Avro keys),
written by confluent-kafka's serializers through the broker's own schema registry, as
struct columns, with no hand decoding; values that do not decode keep their bytes in
`value_raw` (PERMISSIVE) or fail the read naming the offset (FAILFAST); a version registered
after the query was planned is read into the struct the query has."""

from __future__ import annotations

import base64
import datetime
import json

import pytest
from test_iceberg_value_schema import ORDER_PROTO, ORDER_PROTO_V2, expected_order, order_class, proto_order

ORDER_V1 = {
    "type": "record",
    "name": "Order",
    "namespace": "lb.spark",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "item", "type": "string"},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {
            "name": "ship",
            "type": [
                "null",
                {"type": "record", "name": "Ship", "fields": [{"name": "city", "type": "string"}]},
            ],
            "default": None,
        },
    ],
}
ORDER_V2 = json.loads(json.dumps(ORDER_V1))
ORDER_V2["fields"].append({"name": "qty", "type": ["null", "int"], "default": None})
ORDER_V3 = json.loads(json.dumps(ORDER_V2))  # registered after the query is planned
ORDER_V3["fields"].append({"name": "note", "type": ["null", "string"], "default": None})
KEY = {"type": "record", "name": "OrderKey", "namespace": "lb.spark", "fields": [{"name": "id", "type": "long"}]}
EVENT = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Event",
    "type": "object",
    "properties": {"name": {"type": "string"}, "n": {"type": "integer"}, "score": {"type": "number"}},
}
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def order(i: int, version: int) -> dict:
    d = {
        "id": i,
        "item": f"item-{i}",
        "at": EPOCH + datetime.timedelta(milliseconds=1_700_000_000_000 + i),
        "day": datetime.date(2024, 1, 1) + datetime.timedelta(days=i % 30),
        "tags": [f"t{j}" for j in range(i % 3)],
        "ship": {"city": f"city-{i}"} if i % 4 else None,
    }
    if version >= 2:
        d["qty"] = i * 10
    if version >= 3:
        d["note"] = f"note-{i}"
    return d


def expected(i: int, version: int) -> dict:
    """The value struct's row as Spark reads it (the query's struct: v1 + v2 fields)."""
    d = order(i, version)
    ms = 1_700_000_000_000 + i  # PySpark gives a timestamp as the driver's local time
    return {
        "id": i,
        "item": d["item"],
        "at": datetime.datetime.fromtimestamp(ms // 1000).replace(microsecond=ms % 1000 * 1000),
        "day": d["day"],
        "tags": d["tags"],
        "ship": {"city": d["ship"]["city"]} if d["ship"] else None,
        "qty": d.get("qty"),
    }


@pytest.fixture(scope="module")
def registry_topics():
    """A broker with its registry; topic `orders` (2 partitions) with Avro keys and values of
    two versions, a value that is not framed and a tombstone; topic `events` with JSON
    Schema values; topic `porders` with Protobuf values of two versions. Yields (bootstrap,
    registry url, registry client, producer, model), the model being rows per topic."""
    from confluent_kafka import Producer
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.schema_registry.json_schema import JSONSerializer
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    import logbroker
    from logbroker import Admin, NewTopic

    with logbroker.Broker(schema_registry_listen="127.0.0.1:0") as b:
        host, port = b.server.schema_registry_address
        url = f"http://{host}:{port}"
        sr = SchemaRegistryClient({"url": url})
        with Admin(b.bootstrap_servers) as admin:
            admin.create_topics([NewTopic("orders", 2, 1), NewTopic("events", 1, 1), NewTopic("porders", 1, 1)])
        p = Producer({"bootstrap.servers": b.bootstrap_servers, "linger.ms": 5})
        value_ctx = SerializationContext("orders", MessageField.VALUE)
        key_ctx = SerializationContext("orders", MessageField.KEY)
        keys = AvroSerializer(sr, json.dumps(KEY))
        model: dict = {"orders": [], "events": [], "porders": []}
        for version, schema in ((1, ORDER_V1), (2, ORDER_V2)):
            ser = AvroSerializer(sr, json.dumps(schema))
            for i in range(40 * (version - 1), 40 * version):
                p.produce("orders", ser(order(i, version), value_ctx), key=keys({"id": i}, key_ctx), partition=i % 2)
                model["orders"].append((i % 2, i, version))
        p.produce("orders", b"not framed", key=keys({"id": 1000}, key_ctx), partition=0)
        p.produce("orders", None, key=keys({"id": 1001}, key_ctx), partition=1)
        events = JSONSerializer(json.dumps(EVENT), sr)
        events_ctx = SerializationContext("events", MessageField.VALUE)
        for i in range(30):
            p.produce("events", events({"name": f"e{i}", "n": i, "score": i / 4}, events_ctx))
        porders_ctx = SerializationContext("porders", MessageField.VALUE)
        for text, v2, ids in ((ORDER_PROTO, False, range(20)), (ORDER_PROTO_V2, True, range(20, 40))):
            cls = order_class(text)
            proto = ProtobufSerializer(cls, sr, {"use.deprecated.format": False})
            for i in ids:
                m = proto_order(cls, i, v2)
                p.produce("porders", proto(m, porders_ctx))
                model["porders"].append(expected_order(m, v2))
        assert p.flush(30) == 0
        yield b.bootstrap_servers, url, sr, p, model
        sr.close()


def read(spark, bootstrap: str, url: str, topic: str, stream: bool = False, **options):
    """The logbroker source over `topic` with the registry at `url` (`value_format="registry"`
    for option value.format, and so on); `stream`: a streaming read from the earliest offsets."""
    r = (
        (
            spark.readStream.format("logbroker").option("startingOffsets", "earliest")
            if stream
            else spark.read.format("logbroker")
        )
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("schema.registry.url", url)
    )
    for k, v in options.items():
        r = r.option(k.replace("_", "."), v)
    return r.load()


def test_avro_values_and_keys_read_as_struct_columns(spark, registry_topics) -> None:
    bootstrap, url, _, _, model = registry_topics
    df = read(spark, bootstrap, url, "orders", value_format="registry", key_format="registry")
    assert df.schema["value"].dataType.simpleString() == (
        "struct<id:bigint,item:string,at:timestamp,day:date,tags:array<string>,ship:struct<city:string>,qty:int>"
    )
    assert df.schema["key"].dataType.simpleString() == "struct<id:bigint>"
    assert [f.name for f in df.schema.fields][-4:] == ["key_schema_id", "key_raw", "value_schema_id", "value_raw"]
    rows = df.orderBy("partition", "offset").collect()
    decoded = {r["value"]["id"]: r for r in rows if r["value"] is not None}
    assert sorted(decoded) == list(range(80))
    for _, i, version in model["orders"]:
        r = decoded[i]
        assert r["value"].asDict(recursive=True) == expected(i, version), i
        assert r["key"]["id"] == i and r["key_raw"] is None and r["value_raw"] is None
    assert len({r["value_schema_id"] for r in decoded.values()}) == 2
    # a value that is not framed: null struct, its bytes kept; a tombstone: null, nothing raw
    odd = {r["key"]["id"]: r for r in rows if r["value"] is None}
    assert odd[1000]["value_raw"] == b"not framed" and odd[1000]["value_schema_id"] is None
    assert odd[1001]["value_raw"] is None
    # the struct's fields are columns to Spark SQL
    assert df.where("value.qty >= 500").count() == sum(1 for i in range(40, 80) if i * 10 >= 500)


def test_json_schema_values_read_as_a_struct(spark, registry_topics) -> None:
    bootstrap, url, *_ = registry_topics
    df = read(spark, bootstrap, url, "events", value_format="registry")
    assert df.schema["value"].dataType.simpleString() == "struct<name:string,n:bigint,score:double>"
    assert df.schema["key"].dataType.simpleString() == "binary"
    got = [r["value"].asDict() for r in df.orderBy("offset").collect()]
    assert got == [{"name": f"e{i}", "n": i, "score": i / 4} for i in range(30)]


def test_protobuf_values_read_as_a_struct(spark, registry_topics) -> None:
    bootstrap, url, _, _, model = registry_topics
    df = read(spark, bootstrap, url, "porders", value_format="registry")
    assert df.schema["value"].dataType["referrer"].dataType.simpleString() == "string"
    got = [r["value"].asDict(recursive=True) for r in df.orderBy("offset").collect()]
    assert got == model["porders"]


def test_failfast_names_the_offset_and_the_reason(spark, registry_topics) -> None:
    bootstrap, url, *_ = registry_topics
    df = read(spark, bootstrap, url, "orders", value_format="registry", mode="FAILFAST")
    with pytest.raises(Exception, match=r"orders-0 offset \d+: the value does not decode .*Confluent's framing"):
        df.collect()
    with pytest.raises(Exception, match="schema.registry.url"):
        spark.read.format("logbroker").option("bootstrap.servers", bootstrap).option("subscribe", "orders").option(
            "value.format", "registry"
        ).load()


def test_a_version_registered_after_planning_reads_into_the_querys_struct(spark, registry_topics) -> None:
    """Batch: the schema is the registry's when the DataFrame is made; a version registered
    before the read decodes its shared fields (its new one is left out). Streaming: every
    micro-batch is planned with the versions registered by then."""
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    bootstrap, url, sr, p, _ = registry_topics
    df = read(spark, bootstrap, url, "orders", value_format="registry")
    stream = read(spark, bootstrap, url, "orders", stream=True, value_format="registry")
    ser = AvroSerializer(sr, json.dumps(ORDER_V3))
    ctx = SerializationContext("orders", MessageField.VALUE)
    for i in range(100, 110):
        p.produce("orders", ser(order(i, 3), ctx), partition=i % 2)
    assert p.flush(30) == 0
    assert "note" not in df.schema["value"].dataType.fieldNames()
    late = {r["value"]["id"]: r for r in df.where("value.id >= 100").collect()}
    assert sorted(late) == list(range(100, 110))
    assert all(late[i]["value"].asDict(recursive=True) == expected(i, 3) for i in late)
    assert len({r["value_schema_id"] for r in late.values()}) == 1 and all(
        r["value_raw"] is None for r in late.values()
    )

    got = []
    q = (
        stream.where("value.id >= 100")
        .writeStream.trigger(availableNow=True)
        .foreachBatch(lambda batch, _: got.extend(r["value"]["id"] for r in batch.collect()))
        .start()
    )
    q.awaitTermination(120)
    assert q.exception() is None
    assert sorted(got) == list(range(100, 110))


def test_the_sink_writes_struct_rows_as_registered_avro(spark, registry_topics) -> None:
    """`value.format=registry` on the sink: the struct rows as Avro in Confluent's framing,
    their schema registered under `<topic>-value`; confluent-kafka's AvroDeserializer reads
    the values back as written, a null struct is a tombstone, and the source reads the same
    rows back."""
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    import logbroker
    from logbroker import Admin, NewTopic

    bootstrap, url, sr, _, _ = registry_topics
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic("sunk", 1, 1)])
    schema = "key struct<id: bigint>, " + SUNK_SCHEMA
    rows = [({"id": i}, value) for i, (value,) in enumerate(sunk_rows())]
    (
        spark.createDataFrame(rows, schema)
        .write.format("logbroker")
        .mode("append")
        .option("bootstrap.servers", bootstrap)
        .option("topic", "sunk")
        .option("value.format", "registry")
        .option("key.format", "registry")
        .option("schema.registry.url", url)
        .save()
    )
    registered = json.loads(sr.get_latest_version("sunk-value").schema.schema_str)
    assert [f["name"] for f in registered["fields"]][:3] == ["id", "item", "qty"]
    assert sr.get_latest_version("sunk-key").schema_id != sr.get_latest_version("sunk-value").schema_id

    with logbroker.Consumer(bootstrap, auto_offset_reset="earliest") as c:
        c.assign([logbroker.TopicPartition("sunk", 0)])
        got = []
        while len(got) < 20:
            got += c.poll(1.0)
    deserialize = AvroDeserializer(sr)
    value_ctx = SerializationContext("sunk", MessageField.VALUE)
    key_ctx = SerializationContext("sunk", MessageField.KEY)
    by_id = {deserialize(r.key, key_ctx)["id"]: r.value for r in got}
    assert by_id[7] is None  # a null struct: a tombstone
    for key, value in rows:
        if value is None:
            continue
        decoded = deserialize(by_id[key["id"]], value_ctx)
        want = dict(value, at=value["at"].astimezone(datetime.UTC))  # timestamp-micros: an instant
        assert decoded == want, (decoded, want)

    back = read(spark, bootstrap, url, "sunk", value_format="registry")
    got = {r["value"]["id"]: r["value"].asDict(recursive=True) for r in back.collect() if r["value"] is not None}
    assert got == {v["id"]: v for _, v in rows if v is not None}


SUNK_SCHEMA = (
    "value struct<id: bigint, item: string, qty: int, price: double, ok: boolean, "
    "tags: array<string>, ship: struct<city: string>, at: timestamp, day: date, blob: binary>"
)


def sunk_rows() -> list[tuple]:
    at = datetime.datetime(2024, 5, 6, 7, 8, 9, 123456)  # naive: the driver's local time, as PySpark has it
    return [
        (
            {
                "id": i,
                "item": f"item-{i}",
                "qty": None if i % 5 == 0 else i,
                "price": i / 8,
                "ok": i % 2 == 0,
                "tags": [f"t{j}" for j in range(i % 3)],
                "ship": {"city": f"c{i}"} if i % 4 else None,
                "at": at + datetime.timedelta(seconds=i),
                "day": datetime.date(2024, 1, 1) + datetime.timedelta(days=i),
                "blob": bytes([i]),
            }
            if i != 7
            else None,
        )
        for i in range(20)
    ]


def write_and_consume(spark, bootstrap: str, url: str, topic: str, schema_type: str) -> dict:
    """`sunk_rows` written to `topic` with value.schema.type=`schema_type`; the values consumed
    back, by id (framed bytes, or None for the tombstone of id 7)."""
    import logbroker
    from logbroker import Admin, NewTopic

    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])
    (
        spark.createDataFrame([(i, r[0]) for i, r in enumerate(sunk_rows())], "k int, " + SUNK_SCHEMA)
        .selectExpr("CAST(k AS STRING) AS key", "value")
        .write.format("logbroker")
        .mode("append")
        .option("bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("value.format", "registry")
        .option("value.schema.type", schema_type)
        .option("schema.registry.url", url)
        .save()
    )
    with logbroker.Consumer(bootstrap, auto_offset_reset="earliest") as c:
        c.assign([logbroker.TopicPartition(topic, 0)])
        got = []
        while len(got) < 20:
            got += c.poll(1.0)
    return {int(r.key): r.value for r in got}


def test_the_sink_writes_struct_rows_as_registered_json(spark, registry_topics) -> None:
    """value.schema.type=json: each row a JSON object after Confluent's framing, its JSON
    Schema registered under <topic>-value (types as rust/src/json_encode.rs says); the source
    reads them back through the registry."""
    bootstrap, url, sr, _, _ = registry_topics
    by_id = write_and_consume(spark, bootstrap, url, "jsunk", "json")
    latest = sr.get_latest_version("jsunk-value")
    assert latest.schema.schema_type == "JSON"
    assert json.loads(latest.schema.schema_str)["properties"]["at"]["oneOf"][1]["format"] == "date-time"
    assert by_id[7] is None
    for i, (value,) in enumerate(sunk_rows()):
        if value is None:
            continue
        framed = by_id[i]
        assert framed[0] == 0 and int.from_bytes(framed[1:5], "big") == latest.schema_id
        got = json.loads(framed[5:])
        at = value["at"].astimezone(datetime.UTC)
        want = dict(
            value,
            at=at.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            day=value["day"].isoformat(),
            blob=base64.b64encode(value["blob"]).decode(),
        )
        assert got == want, (got, want)
    back = read(spark, bootstrap, url, "jsunk", value_format="registry")
    got = {r["value"]["id"]: r["value"] for r in back.collect() if r["value"] is not None}
    assert sorted(got) == [i for i in range(20) if i != 7]
    assert got[5]["item"] == "item-5" and got[5]["tags"] == ["t0", "t1"] and got[5]["price"] == 5 / 8
    assert got[6]["ship"]["city"] == "c6" and got[4]["ship"] is None and got[5]["qty"] is None


def test_the_sink_writes_struct_rows_as_registered_protobuf(spark, registry_topics) -> None:
    """value.schema.type=protobuf: each row a message of the proto3 file registered under
    <topic>-value (rust/src/proto_encode.rs), read by confluent-kafka's ProtobufDeserializer
    with a class built from the registered text; the source reads them back too."""
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    bootstrap, url, sr, _, _ = registry_topics
    by_id = write_and_consume(spark, bootstrap, url, "psunk", "protobuf")
    latest = sr.get_latest_version("psunk-value")
    assert latest.schema.schema_type == "PROTOBUF"
    cls = order_class(latest.schema.schema_str, "psunk_value", "logbroker.spark")
    deserialize = ProtobufDeserializer(cls, {"use.deprecated.format": False})
    ctx = SerializationContext("psunk", MessageField.VALUE)
    assert by_id[7] is None
    for i, (value,) in enumerate(sunk_rows()):
        if value is None:
            continue
        m = deserialize(by_id[i], ctx)
        at = value["at"].astimezone(datetime.UTC)
        assert (m.id, m.item, m.price, m.ok, list(m.tags), m.blob) == (
            value["id"],
            value["item"],
            value["price"],
            value["ok"],
            value["tags"],
            value["blob"],
        )
        assert m.HasField("qty") == (value["qty"] is not None) and (value["qty"] is None or m.qty == value["qty"])
        assert m.HasField("ship") == (value["ship"] is not None) and (value["ship"] is None or m.ship.city == f"c{i}")
        assert m.at.ToDatetime(tzinfo=datetime.UTC) == at
        assert m.day == (value["day"] - datetime.date(1970, 1, 1)).days
    back = read(spark, bootstrap, url, "psunk", value_format="registry")
    got = {r["value"]["id"]: r["value"] for r in back.collect() if r["value"] is not None}
    assert sorted(got) == [i for i in range(20) if i != 7]
    assert got[6]["ship"]["city"] == "c6" and got[4]["ship"] is None and got[5]["qty"] is None


def test_a_stream_writes_struct_rows_as_registered_avro(spark, registry_topics, tmp_path) -> None:
    """The streaming sink with `value.format=registry`: a micro-batch of `orders`' decoded
    values copied as Avro records of a new schema, read back by the source."""
    from logbroker import Admin, NewTopic

    bootstrap, url, *_ = registry_topics
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic("copied", 1, 1)])
    source = (
        read(spark, bootstrap, url, "orders", stream=True, value_format="registry")
        .where("value.id < 80")
        .selectExpr("named_struct('id', value.id, 'item', upper(value.item)) AS value")
    )
    q = (
        source.writeStream.format("logbroker")
        .option("bootstrap.servers", bootstrap)
        .option("topic", "copied")
        .option("value.format", "registry")
        .option("schema.registry.url", url)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(120)
    assert q.exception() is None
    back = read(spark, bootstrap, url, "copied", value_format="registry")
    assert back.schema["value"].dataType.simpleString() == "struct<id:bigint,item:string>"
    got = sorted((r["value"]["id"], r["value"]["item"]) for r in back.collect())
    assert got == [(i, f"ITEM-{i}") for i in range(80)]
