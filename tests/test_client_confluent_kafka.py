"""librdkafka (confluent-kafka) against a real logbroker broker on loopback."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from conftest import CODECS, Rec, check_partition_records, make_records


def create_topic(bootstrap: str, name: str, partitions: int, **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fut = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1, config=config)])
    fut[name].result(10)


def produce(bootstrap: str, topic: str, records: list[Rec], **conf) -> None:
    errors = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(err)

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf})
    for r in records:
        p.produce(
            topic,
            value=r.value,
            key=r.key,
            partition=r.partition,
            headers=list(r.headers) or None,
            on_delivery=on_delivery,
        )
        p.poll(0)
    assert p.flush(30) == 0
    assert not errors, errors[:3]


def consume_all(bootstrap: str, topic: str, partitions: int, expected: int, timeout: float = 30) -> dict[int, list]:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused-assign-only",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": False,
        }
    )
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: dict[int, list] = {}
    n = 0
    deadline = time.monotonic() + timeout
    try:
        while n < expected and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            headers = tuple((k, v) for k, v in (msg.headers() or []))
            got.setdefault(msg.partition(), []).append(
                (msg.offset(), Rec(msg.partition(), msg.key(), msg.value(), headers))
            )
            n += 1
    finally:
        c.close()
    assert n == expected, f"consumed {n} of {expected}"
    return got


@pytest.mark.parametrize("codec", CODECS)
def test_roundtrip_every_codec_idempotent(broker, codec):
    topic = f"ck-{codec}"
    create_topic(broker.bootstrap_servers, topic, 3)
    records = make_records(600, 3, tag=codec)
    produce(broker.bootstrap_servers, topic, records, **{"compression.type": codec, "enable.idempotence": True})
    check_partition_records(records, consume_all(broker.bootstrap_servers, topic, 3, len(records)))


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_roundtrip_acks(broker, acks):
    topic = f"ck-acks-{acks}"
    create_topic(broker.bootstrap_servers, topic, 2)
    records = make_records(200, 2, tag=acks)
    produce(broker.bootstrap_servers, topic, records, acks=acks)
    check_partition_records(records, consume_all(broker.bootstrap_servers, topic, 2, len(records)))


def test_auto_created_topic_by_producer(broker):
    # librdkafka asks Metadata for the topic; auto.create.topics.enable creates it.
    records = [Rec(0, b"k", b"v", ())]
    produce(broker.bootstrap_servers, "auto-made", records)
    check_partition_records(records, consume_all(broker.bootstrap_servers, "auto-made", 1, 1))


def test_admin_create_describe_partitions_delete(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    fs = admin.create_topics(
        [NewTopic("adm", num_partitions=2, replication_factor=1, config={"retention.ms": "3600000"})]
    )
    fs["adm"].result(10)
    # duplicate creation is refused with TOPIC_ALREADY_EXISTS
    dup = admin.create_topics([NewTopic("adm", num_partitions=2, replication_factor=1)])
    with pytest.raises(Exception) as ei:
        dup["adm"].result(10)
    assert ei.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS
    md = admin.list_topics(timeout=10)
    assert len(md.topics["adm"].partitions) == 2
    assert md.topics["adm"].partitions[0].leader == broker.server.node_id
    admin.create_partitions([NewPartitions("adm", 5)])["adm"].result(10)
    assert len(admin.list_topics(timeout=10).topics["adm"].partitions) == 5
    from confluent_kafka.admin import ConfigResource

    res = ConfigResource(ConfigResource.Type.TOPIC, "adm")
    configs = admin.describe_configs([res])[res].result(10)
    assert configs["retention.ms"].value == "3600000"
    assert configs["segment.bytes"].value == "1073741824"
    admin.delete_topics(["adm"])["adm"].result(10)
    assert "adm" not in admin.list_topics(timeout=10).topics
