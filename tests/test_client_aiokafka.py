"""aiokafka (asyncio, non-flexible protocol versions only) against logbroker."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from conftest import CODECS, Rec, check_partition_records, make_records


async def _roundtrip(bootstrap: str, topic: str, codec: str, records: list[Rec]) -> dict:
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        compression_type=None if codec == "none" else codec,
        enable_idempotence=True,
        linger_ms=5,
    )
    await producer.start()
    try:
        futs = [
            await producer.send(topic, value=r.value, key=r.key, partition=r.partition, headers=list(r.headers))
            for r in records
        ]
        await asyncio.gather(*futs)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None, auto_offset_reset="earliest"
    )
    await consumer.start()
    got: dict[int, list] = {}
    n = 0
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(3)])
        for p in range(3):
            consumer.seek(TopicPartition(topic, p), 0)
        async with asyncio.timeout(30):
            while n < len(records):
                batch = await consumer.getmany(timeout_ms=500)
                for tp, msgs in batch.items():
                    for m in msgs:
                        headers = tuple((k, v) for k, v in (m.headers or ()))
                        got.setdefault(tp.partition, []).append((m.offset, Rec(tp.partition, m.key, m.value, headers)))
                        n += 1
    finally:
        await consumer.stop()
    return got


@pytest.mark.parametrize("codec", CODECS)
def test_roundtrip_every_codec_idempotent(broker, codec):
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"aio-{codec}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])[topic].result(10)
    records = make_records(400, 3, tag=codec)
    got = asyncio.run(_roundtrip(broker.bootstrap_servers, topic, codec, records))
    check_partition_records(records, got)
