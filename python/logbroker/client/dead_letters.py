"""Retries and a dead-letter topic for records a consumer fails to process (classic and
KIP-848 groups, or assigned partitions).

    from logbroker import Consumer, DeadLetters
    with Consumer(group_id="orders-app", enable_auto_commit=False) as c, \\
            DeadLetters(c, topic="orders.DLT", max_attempts=3) as dl:
        c.subscribe(["orders"])
        for record in c:
            dl.process(record, handle)     # handle(record); retried, then dead-lettered
            c.commit()

`process` calls `handler(record)` up to `max_attempts` times (waiting `backoff_ms`,
doubling, between attempts). If every attempt raises, the record goes to the dead-letter
topic, unchanged (key, value, headers, timestamp), with these headers added:

    dlt.source.topic      the topic it was read from
    dlt.source.partition  its partition (decimal)
    dlt.source.offset     its offset (decimal)
    dlt.attempts          how many attempts failed (decimal)
    dlt.error             the last error: its class and message
    dlt.group             the consumer's group id (when it has one)

and `process` returns False once the dead-letter write is acknowledged (acks=all); True
when the handler succeeded. The consumer's position has moved past the record either way,
so committing after `process` never re-reads a dead-lettered record. A dead-letter write
that fails raises (the record is neither processed nor parked: do not commit past it).
The dead-letter topic is created on first use when the broker allows auto-creation, else
it must exist. (Share groups, KIP-932, dead-letter on the broker with
`group.share.delivery.count.limit`.)
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from logbroker.client.errors import ConfigError
from logbroker.client.producer import Producer

__all__ = ["DeadLetters"]

HEADER_TOPIC = "dlt.source.topic"
HEADER_PARTITION = "dlt.source.partition"
HEADER_OFFSET = "dlt.source.offset"
HEADER_ATTEMPTS = "dlt.attempts"
HEADER_ERROR = "dlt.error"
HEADER_GROUP = "dlt.group"


class DeadLetters:
    """Retries a handler on a record, then parks the record in a dead-letter topic (see the
    module docstring)."""

    def __init__(
        self,
        consumer: Any,
        topic: str,
        max_attempts: int = 3,
        backoff_ms: int = 100,
        producer: Producer | None = None,
        **producer_config: Any,
    ) -> None:
        if not topic:
            raise ConfigError("DeadLetters needs a topic")
        if max_attempts < 1:
            raise ConfigError(f"max_attempts must be at least 1, not {max_attempts}")
        self.consumer = consumer
        self.topic = topic
        self.max_attempts = max_attempts
        self.backoff = backoff_ms / 1000
        self._own = producer is None
        config = getattr(consumer, "config", {})
        self.group_id = config.get("group.id")
        self.producer = producer or Producer(
            config.get("bootstrap.servers", "127.0.0.1:9092"), acks="all", **producer_config
        )
        self.dead_lettered = 0

    def process(self, record: Any, handler: Callable[[Any], object]) -> bool:
        """True if `handler(record)` succeeded within max_attempts, False if the record went to
        the dead-letter topic."""
        delay = self.backoff
        error: BaseException | None = None
        for attempt in range(1, self.max_attempts + 1):
            try:
                handler(record)
                return True
            except Exception as e:  # noqa: BLE001 - the handler's failure is the record's fate
                error = e
                if attempt < self.max_attempts:
                    time.sleep(delay)
                    delay *= 2
        self.send(record, self.max_attempts, error)
        return False

    def send(self, record: Any, attempts: int, error: BaseException | None) -> None:
        """Write `record` to the dead-letter topic with the headers above; waits for the ack."""
        headers = list(record.headers or [])
        headers += [
            (HEADER_TOPIC, record.topic.encode()),
            (HEADER_PARTITION, str(record.partition).encode()),
            (HEADER_OFFSET, str(record.offset).encode()),
            (HEADER_ATTEMPTS, str(attempts).encode()),
            (HEADER_ERROR, (f"{type(error).__name__}: {error}" if error is not None else "").encode()[:4096]),
        ]
        if self.group_id:
            headers.append((HEADER_GROUP, str(self.group_id).encode()))
        fut = self.producer.send(
            self.topic,
            record.value,
            key=record.key,
            headers=headers,
            timestamp=record.timestamp if record.timestamp >= 0 else None,
        )
        fut.result(self.producer.config["delivery.timeout.ms"] / 1000 + 5)
        self.dead_lettered += 1

    def close(self) -> None:
        """Flushes and closes the dead-letter producer when this object created it."""
        if self._own:
            self.producer.close()

    def __enter__(self) -> DeadLetters:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
