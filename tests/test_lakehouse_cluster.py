"""The whole of topics as tables on three nodes, under a leader's death (docs/lakehouse.md):
confluent-kafka's AvroSerializer registers and uses a schema in the brokers' registry, a
schema-validated topic refuses a record without a registered id and stores nothing of its
batch, the topic is committed into an Iceberg table with the schema's columns, and a PySpark
job reads every acknowledged record from the table exactly once."""

from __future__ import annotations

import json
from pathlib import Path

from test_iceberg_topics import catalog, shared_lake, wait_for

from logbroker import Cluster

ORDER = json.dumps(
    {
        "type": "record",
        "name": "Order",
        "namespace": "lb.flow",
        "fields": [{"name": "id", "type": "long"}, {"name": "item", "type": "string"}, {"name": "qty", "type": "int"}],
    }
)


def test_registry_validation_iceberg_and_spark_through_a_leader_kill(iceberg_spark, tmp_path: Path) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    base = tmp_path / "lake"
    config = shared_lake(base, 300) | {"schema.registry.topic.replication.factor": 3}
    with Cluster(3, data_dir=tmp_path / "c", schema_registry=True, config=config) as c:
        admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
        admin.create_topics(
            [
                NewTopic(
                    "orders",
                    3,
                    3,
                    config={
                        "min.insync.replicas": "2",
                        "confluent.value.schema.validation": "true",
                        "iceberg.enable": "true",
                        "iceberg.mode": "value_schema_id_prefix",
                    },
                )
            ]
        )["orders"].result(30)
        ctx = SerializationContext("orders", MessageField.VALUE)
        registries = {n.node_id: SchemaRegistryClient({"url": n.schema_registry_url}) for n in c.nodes}
        try:
            ser = AvroSerializer(registries[1], ORDER)
            acked: dict[tuple[int, int], int] = {}
            failed: list[str] = []

            def delivered(i: int):
                def on_delivery(err, msg) -> None:
                    if err is not None:
                        failed.append(str(err))
                    else:
                        acked[(msg.partition(), msg.offset())] = i

                return on_delivery

            p = Producer(
                {"bootstrap.servers": c.bootstrap_servers, "acks": "all", "enable.idempotence": True, "linger.ms": 5}
            )
            for i in range(200):
                p.produce(
                    "orders",
                    ser({"id": i, "item": f"item-{i}", "qty": i % 7}, ctx),
                    partition=i % 3,
                    on_delivery=delivered(i),
                )
            assert p.flush(30) == 0 and not failed

            # A record without a registered id is refused; nothing of its batch is stored.
            md = admin.list_topics("orders", timeout=10).topics["orders"].partitions
            bad = Producer({"bootstrap.servers": c.bootstrap_servers, "acks": "all", "linger.ms": 0, "retries": 0})
            errors: list = []
            bad.produce(
                "orders", b"\x00\x00\x00\x7f\xffnot avro", partition=1, on_delivery=lambda e, m: errors.append(e)
            )
            bad.flush(30)
            assert errors and errors[0] is not None and "INVALID_RECORD" in errors[0].name(), errors
            stored = sum(1 for (part, _o) in acked if part == 1)
            consumer_end = _end_offset(c.bootstrap_servers, "orders", 1)
            assert consumer_end == stored  # the refused record took no offset

            # The leader of partition 0 dies; the producer goes on against the new leaders.
            leader = md[0].leader
            c.node(leader).kill()
            alive = next(n for n in registries if n != leader)
            ser = AvroSerializer(registries[alive], ORDER)
            for i in range(200, 400):
                p.produce(
                    "orders",
                    ser({"id": i, "item": f"item-{i}", "qty": i % 7}, ctx),
                    partition=i % 3,
                    on_delivery=delivered(i),
                )
            assert p.flush(60) == 0 and not failed, failed
            assert len(acked) == 400

            def table_count() -> int:
                try:
                    return catalog(base).load_table("logbroker.orders").scan().to_arrow().num_rows
                except Exception:
                    return 0

            wait_for(lambda: table_count() >= 400, timeout=120, what="every acknowledged record in the table")
            out = iceberg_spark(
                "--db",
                str(base / "catalog.db"),
                "--warehouse",
                str(base / "warehouse"),
                "--table",
                "logbroker.orders",
                "--select",
                "partition,offset,value.id,value.item,value_raw",
            )
            rows = out["table"]
            got = {(r["partition"], r["offset"]): r["id"] for r in rows}
            assert len(rows) == len(got) == 400, "every acknowledged record once"
            assert got == acked
            assert all(r["item"] == f"item-{r['id']}" and r["value_raw"] is None for r in rows)
        finally:  # a failed assertion leaves no open client socket for a later test's collection
            for r in registries.values():
                r.close()


def _end_offset(bootstrap: str, topic: str, partition: int) -> int:
    import logbroker
    from logbroker import Admin

    with Admin(bootstrap) as admin:
        return admin.list_offsets({(topic, partition): "latest"})[logbroker.TopicPartition(topic, partition)][0]
