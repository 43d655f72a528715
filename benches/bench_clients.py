"""Produce and fetch throughput through a real client (confluent-kafka / librdkafka)
against an in-process logbroker broker: 100 B and 1 KiB records, 1 and 8 partitions."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from logbroker import Broker

TOTAL_BYTES = 64 * 1024 * 1024


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with Broker(data_dir=tmp_path_factory.mktemp("bench") / "data") as b:
        yield b


def _produce(bootstrap: str, topic: str, partitions: int, size: int, count: int) -> None:
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
            "acks": "1",
        }
    )
    payload = b"v" * size
    for i in range(count):
        while True:
            try:
                p.produce(topic, payload, partition=i % partitions)
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(120) == 0


@pytest.mark.parametrize("partitions", [1, 8])
@pytest.mark.parametrize("size", [100, 1024])
def test_produce_throughput(benchmark, broker, size, partitions):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    count = TOTAL_BYTES // size
    n = [0]

    def setup():
        n[0] += 1
        topic = f"p-{size}-{partitions}-{n[0]}"
        admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(10)
        return (broker.bootstrap_servers, topic, partitions, size, count), {}

    benchmark.pedantic(_produce, setup=setup, rounds=3, iterations=1)
    med = benchmark.stats.stats.median
    benchmark.extra_info["MB_per_s"] = count * size / med / 1e6
    benchmark.extra_info["records_per_s"] = count / med


@pytest.mark.parametrize("partitions", [1, 8])
@pytest.mark.parametrize("size", [100, 1024])
def test_fetch_throughput(benchmark, broker, size, partitions):
    topic = f"f-{size}-{partitions}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(10)
    count = TOTAL_BYTES // size
    _produce(broker.bootstrap_servers, topic, partitions, size, count)

    def consume():
        c = Consumer(
            {
                "bootstrap.servers": broker.bootstrap_servers,
                "group.id": "bench",
                "enable.auto.commit": False,
                "fetch.max.bytes": 52428800,
                "max.partition.fetch.bytes": 1048576,
            }
        )
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        got = 0
        deadline = time.monotonic() + 120
        while got < count and time.monotonic() < deadline:
            for m in c.consume(10000, 0.5):
                if m.error() is None:
                    got += 1
        c.close()
        assert got == count

    benchmark.pedantic(consume, rounds=3, iterations=1)
    med = benchmark.stats.stats.median
    benchmark.extra_info["MB_per_s"] = count * size / med / 1e6
    benchmark.extra_info["records_per_s"] = count / med
