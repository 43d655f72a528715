"""librdkafka load shared by the listener benchmarks (bench_tls.py, bench_sasl.py): produce
N records as fast as the client takes them, and read them back in a new group."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, Producer


def produce(bs: str, conf: dict, topic: str, n: int, value: bytes) -> None:
    """`n` records of `value` to `topic` (acks=1, linger.ms=5), waiting out full queues."""
    p = Producer({"bootstrap.servers": bs, "acks": 1, "linger.ms": 5, **conf})
    for _ in range(n):
        while True:
            try:
                p.produce(topic, value)
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(60) == 0


def consume(bs: str, conf: dict, topic: str, group: str, n: int) -> None:
    """Read `n` records of `topic` from the beginning in a new group (at most 120 s)."""
    c = Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **conf,
        }
    )
    c.subscribe([topic])
    got, deadline = 0, time.monotonic() + 120
    while got < n and time.monotonic() < deadline:
        for m in c.consume(1000, 1.0):
            if not m.error():
                got += 1
    c.close()
    assert got == n, f"{got} of {n} records of {topic}"
