"""Schema-validated topics (confluent.{key,value}.schema.validation; rust/src/server/schema_ids.rs):
a record whose value (or key) does not carry, in Confluent's framing, a schema id registered
under the topic's subject is refused with INVALID_RECORD naming each such record, and nothing
of its batch is stored; Confluent's serializers pass; without a registry on the broker the
topic refuses produce with POLICY_VIOLATION."""

from __future__ import annotations

import json
import struct
import time

from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from logbroker import Broker

ORDER = json.dumps({"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]})
OTHER = json.dumps({"type": "record", "name": "Other", "fields": [{"name": "x", "type": "string"}]})


def create(bs: str, topic: str, config: dict) -> None:
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(10)


def produce(bs: str, topic: str, items: list[tuple[bytes | None, bytes | None]], linger_ms: int = 0) -> list:
    p = Producer(
        {"bootstrap.servers": bs, "linger.ms": linger_ms, "batch.num.messages": 1000, "message.timeout.ms": 10000}
    )
    outcome: list = [None] * len(items)
    for i, (k, v) in enumerate(items):
        p.produce(
            topic,
            v,
            key=k,
            partition=0,
            on_delivery=lambda err, msg, i=i: outcome.__setitem__(i, err.code() if err else "ok"),
        )
    p.flush(15)
    return outcome


def framed(schema_id: int, payload: bytes = b"\x02") -> bytes:
    return b"\x00" + struct.pack(">i", schema_id) + payload


def test_values_must_carry_a_registered_schema_id(tmp_path):
    with Broker(data_dir=tmp_path / "d", schema_registry_listen="127.0.0.1:0") as b:
        bs = b.bootstrap_servers
        host, port = b.server.schema_registry_address
        sr = SchemaRegistryClient({"url": f"http://{host}:{port}"})
        try:
            create(bs, "orders", {"confluent.value.schema.validation": "true"})
            ser = AvroSerializer(sr, ORDER)
            good = [ser({"id": i}, SerializationContext("orders", MessageField.VALUE)) for i in range(5)]
            assert produce(bs, "orders", [(None, v) for v in good]) == ["ok"] * 5
            log = b.server.replicas.get("orders", 0).log
            assert log.log_end_offset == 5
            order_id = sr.get_latest_version("orders-value").schema_id
            other_id = sr.register_schema("other-value", Schema(OTHER, "AVRO"))
            assert other_id != order_id
            # not framed, an id of another subject, an id nobody registered: all refused
            for bad in (b"plain text", framed(other_id), framed(9999), b"\x00\x00"):
                assert produce(bs, "orders", [(None, bad)]) == [KafkaError.INVALID_RECORD], bad
            assert log.log_end_offset == 5  # nothing of them stored
            # one batch with two bad records: exactly those fail, the rest with them
            batch = [(None, framed(order_id)) for _ in range(10)]
            batch[3], batch[7] = (None, b"nope"), (None, framed(other_id))
            got = produce(bs, "orders", batch, linger_ms=300)
            assert [i for i, c in enumerate(got) if c == KafkaError.INVALID_RECORD] == [3, 7], got
            assert all(c == KafkaError._INVALID_DIFFERENT_RECORD for i, c in enumerate(got) if i not in (3, 7)), got
            assert log.log_end_offset == 5
            # a tombstone (null value) needs no schema; keys are not checked on this topic
            assert produce(bs, "orders", [(b"k", None), (b"any key", framed(order_id))]) == ["ok", "ok"]
            # a key-validated topic checks keys against <topic>-key
            create(bs, "keyed", {"confluent.key.schema.validation": "true"})
            key_id = sr.register_schema("keyed-key", Schema(json.dumps("string"), "AVRO"))
            assert produce(bs, "keyed", [(framed(key_id), b"v")]) == ["ok"]
            assert produce(bs, "keyed", [(b"raw", b"v")]) == [KafkaError.INVALID_RECORD]
        finally:
            sr.close()


def test_a_broker_without_the_registry_refuses_validated_topics(tmp_path):
    with Broker(data_dir=tmp_path / "d") as b:
        create(b.bootstrap_servers, "checked", {"confluent.value.schema.validation": "true"})
        assert produce(b.bootstrap_servers, "checked", [(None, framed(1))]) == [KafkaError.POLICY_VIOLATION]
        create(b.bootstrap_servers, "plain", {})
        assert produce(b.bootstrap_servers, "plain", [(None, b"anything")]) == ["ok"]
        deadline = time.monotonic() + 5
        while b.server.replicas.get("checked", 0).log.log_end_offset != 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert b.server.replicas.get("checked", 0).log.log_end_offset == 0


def test_an_id_registered_a_moment_ago_elsewhere_is_read_before_it_is_refused(tmp_path):
    """An id written to `_schemas` by another registry is acknowledged before this broker's
    registry has read it; a record naming it right after must pass: the broker reads
    `_schemas` to its end before refusing an id it does not hold (produce.rs, schema_ids.rs).
    The schema records are written as Confluent's registry writes them, straight to
    `_schemas`, and each framed record is sent the moment its schema record is acknowledged."""
    with Broker(data_dir=tmp_path / "d", schema_registry_listen="127.0.0.1:0") as b:
        bs = b.bootstrap_servers
        create(bs, "orders", {"confluent.value.schema.validation": "true"})
        p = Producer({"bootstrap.servers": bs, "linger.ms": 0, "acks": "all", "message.timeout.ms": 20000})
        outcome: dict[str, list] = {"_schemas": [], "orders": []}

        def on_delivery(err, msg) -> None:
            outcome[msg.topic()].append(err.code() if err else "ok")

        for version in range(1, 21):
            schema_id = 100 + version
            fields = [{"name": f"f{i}", "type": "long", "default": 0} for i in range(version)]
            key = {"keytype": "SCHEMA", "subject": "orders-value", "version": version, "magic": 1}
            value = {
                "subject": "orders-value",
                "version": version,
                "id": schema_id,
                "schema": json.dumps({"type": "record", "name": "Order", "fields": fields}),
                "deleted": False,
            }
            p.produce("_schemas", json.dumps(value).encode(), key=json.dumps(key).encode(), on_delivery=on_delivery)
            p.flush(15)
            p.produce("orders", framed(schema_id), partition=0, on_delivery=on_delivery)
            p.flush(15)
        assert outcome["_schemas"] == ["ok"] * 20
        assert outcome["orders"] == ["ok"] * 20, outcome["orders"]
        assert b.server.replicas.get("orders", 0).log.log_end_offset == 20
        # an id nobody registered is still refused, after the read
        assert produce(bs, "orders", [(None, framed(9999))]) == [KafkaError.INVALID_RECORD]
