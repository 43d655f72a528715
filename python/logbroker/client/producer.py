"""`Producer`: the sync Kafka producer. Records are encoded into per-partition batches in
Rust as `send()` is called; a background thread (`driver.py`) runs the sans-I/O core
(`sender.py`) that ships them.

    with Producer(bootstrap_servers="127.0.0.1:9092", linger_ms=5) as p:
        fut = p.send("events", b"payload", key=b"user-1")
        print(fut.result(timeout=10))      # RecordMetadata(topic, partition, offset, timestamp)

Transactions (`transactional_id=...`, see client/transactions.py):

    p = Producer(transactional_id="etl-1")
    p.init_transactions()
    p.begin_transaction()
    p.send("out", b"...")
    p.send_offsets_to_transaction({("in", 0): 42}, consumer)   # or a group id
    p.commit_transaction()                                      # or abort_transaction()

Thread-safety: every method may be called from any thread.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable, Iterable
from typing import Any

from logbroker import _core
from logbroker.client import config as _config
from logbroker.client.driver import ThreadDriver
from logbroker.client.errors import (
    ClientClosedError,
    ConfigError,
    KafkaError,
    KafkaTimeoutError,
    SerializationError,
    error_class,
)
from logbroker.client.sender import ProducerCore
from logbroker.client.transactions import TransactionManager, TransactionStateError
from logbroker.deliver_at import with_deliver_at
from logbroker.protocol import ErrorCode

__all__ = ["Producer", "Partitioner", "RecordFuture", "RecordMetadata"]

RecordFuture = _core.RecordFuture
RecordMetadata = _core.RecordMetadata

Headers = Iterable[tuple[str | bytes, bytes | str | None]] | dict[str, bytes | str | None] | None
# partitioner(topic, key, partition_count) -> partition
Partitioner = Callable[[str, "bytes | None", int], int]


def raise_accumulator_error(e: _core.AccumulatorError, topic: str) -> None:
    """The one place the accumulator's refusals become public exceptions."""
    kind, message = e.args
    if kind == "RecordTooLarge":
        raise error_class(ErrorCode.MESSAGE_TOO_LARGE)(message) from None
    if kind == "UnknownPartition":
        raise error_class(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)(message) from None
    if kind == "Closed":
        raise ClientClosedError("the producer is closed") from None
    raise KafkaError(message) from None


class ProducerBase:
    """What the sync and trio producers share: config, core, send's fast path."""

    def __init__(self, bootstrap_servers: str | list[str], config: dict[str, Any]) -> None:
        self.config = _config.build_producer({"bootstrap.servers": bootstrap_servers, **config})
        self._partitioner: Partitioner | None = self.config["partitioner"]
        if self._partitioner is not None and not callable(self._partitioner):
            raise ConfigError("partitioner must be a callable (topic, key, partition_count) -> partition")
        self._core = ProducerCore(self.config)
        self._acc = self._core.acc
        self._closed = False

    def _pick_partition(self, topic: str, key: Any, partition: int | None) -> int | None:
        if partition is not None or self._partitioner is None:
            return partition
        n = self._acc.partitions(topic)
        if n is None:
            return None
        kb = key.encode() if isinstance(key, str) else key
        return int(self._partitioner(topic, kb, n))

    def _append(
        self, topic: str, value: Any, key: Any, partition: int | None, timestamp: int | None, headers: Headers
    ) -> _core.RecordFuture | None:
        """The record's future, or None when the topic's metadata or buffer space is missing."""
        if self._closed:
            raise ClientClosedError("the producer is closed")
        if self._core.txn is not None:
            self._core.txn.check_send()
        try:
            return self._acc.append(topic, value, key, self._pick_partition(topic, key, partition), timestamp, headers)
        except _core.AccumulatorError as e:
            if e.args[0] in ("UnknownTopic", "BufferFull"):
                return None
            raise_accumulator_error(e, topic)
        except TypeError as e:
            raise SerializationError(f"record for topic {topic!r}: {e}") from None
        return None  # unreachable

    def _txn(self) -> TransactionManager:
        if self._core.txn is None:
            raise TransactionStateError("transactions need transactional_id in the producer's configuration")
        return self._core.txn

    @staticmethod
    def _offsets_and_group(offsets: Any, group: Any) -> tuple[dict[tuple[str, int], int], str, int, str, str | None]:
        """{(topic, partition): next offset} and (group id, generation, member id, instance id)
        from `group`: a group id, or a logbroker Consumer in a group (its membership)."""
        out = {}
        items = offsets.items() if isinstance(offsets, dict) else ((o[:2], o[2]) for o in offsets)
        for tp, off in items:
            out[(str(tp[0]), int(tp[1]))] = int(off)
        if isinstance(group, str):
            return out, group, -1, "", None
        core = getattr(group, "_core", None)
        membership = getattr(core, "group", None)
        if membership is None:
            raise ConfigError("send_offsets_to_transaction: pass a group id or a Consumer with a group_id")
        generation: Any = getattr(membership, "generation", None)
        if generation is None:
            generation = getattr(membership, "epoch", -1)
        instance_id: str | None = getattr(membership, "instance_id", None)
        return out, str(membership.group_id), int(generation), str(membership.member_id or ""), instance_id

    def _why_blocked(self, topic: str) -> str:
        if self._acc.partitions(topic) is None:
            return "metadata"
        return "buffer"


class Producer(ProducerBase):
    """A Kafka producer (configuration keys as in Kafka: see docs/client.md).

    `send()` returns a `RecordFuture` at once (blocking only while the topic's metadata is
    unknown or `buffer.memory` is full, up to `max.block.ms`)."""

    def __init__(self, bootstrap_servers: str | list[str] = "127.0.0.1:9092", **config: Any) -> None:
        super().__init__(bootstrap_servers, config)
        self._driver = ThreadDriver(self._core, "logbroker-producer")

    def send(
        self,
        topic: str,
        value: bytes | str | None = None,
        key: bytes | str | None = None,
        partition: int | None = None,
        headers: Headers = None,
        timestamp: int | None = None,
        deliver_at: int | datetime.datetime | datetime.timedelta | None = None,
    ) -> RecordFuture:
        """Queues one record; returns its future (`.result(timeout)`, `.add_done_callback`).
        `deliver_at` (ms since the epoch, a datetime, or a timedelta from now): share groups
        hand the record out only from then (header `logbroker.deliver.at`, logbroker/deliver_at.py);
        plain consumers see it at once."""
        if deliver_at is not None:
            headers = with_deliver_at(headers, deliver_at)
        fut = self._append(topic, value, key, partition, timestamp, headers)
        if fut is not None:
            return fut
        return self._send_slow(topic, value, key, partition, headers, timestamp)

    def _send_slow(
        self, topic: str, value: Any, key: Any, partition: int | None, headers: Headers, timestamp: int | None
    ) -> RecordFuture:
        max_block = self.config["max.block.ms"] / 1000
        deadline = time.monotonic() + max_block
        while True:
            left = deadline - time.monotonic()
            if self._acc.partitions(topic) is None:
                if left <= 0:
                    raise KafkaTimeoutError(
                        f"topic {topic!r} not present in metadata after max.block.ms={max_block * 1000:.0f}"
                    )
                self._driver.call_wait(
                    lambda: self._core.wait_for_topic(topic, left),  # noqa: B023 - called before the loop goes on
                    left + 1.0,
                    f"waiting for metadata of topic {topic!r}",
                )
            else:
                if left <= 0:
                    raise KafkaTimeoutError(
                        f"buffer.memory={self.config['buffer.memory']} stayed full for max.block.ms={max_block * 1000:.0f}"
                    )
                # As Kafka's producer: while an append waits for memory, open batches are
                # sent without waiting for linger.ms (they hold the memory it waits for).
                self._acc.begin_flush()
                self._acc.wait_for_space(min(0.1, left))
            fut = self._append(topic, value, key, partition, timestamp, headers)
            if fut is not None:
                return fut

    def flush(self, timeout: float | None = None) -> None:
        """Sends everything queued now and waits until every record completed (or failed).
        Raises KafkaTimeoutError naming how many records are still outstanding."""
        self._acc.begin_flush()
        if not self._acc.wait_idle(timeout):
            raise KafkaTimeoutError(f"flush: {self._acc.incomplete} record(s) still outstanding after {timeout}s")

    # -- transactions (transactional_id set) ------------------------------------------------

    def init_transactions(self, timeout: float | None = None) -> None:
        """Registers the transactional id: gets its producer id and epoch, fencing older
        producers with the same id (their open transaction is aborted)."""
        txn = self._txn()
        t = self.config["max.block.ms"] / 1000 if timeout is None else timeout
        self._driver.call_wait(lambda: txn.init(t), t + 1.0, f"init_transactions({txn.txn_id!r})")

    def begin_transaction(self) -> None:
        """Starts a transaction (after init_transactions()): records sent until commit_transaction() or
        abort_transaction() belong to it."""
        self._txn().begin()

    def send_offsets_to_transaction(self, offsets: Any, group: Any, timeout: float | None = None) -> None:
        """Commits consumer offsets ({(topic, partition): next offset}) with the transaction;
        `group` is a group id or the Consumer (then its generation and member id are sent)."""
        txn = self._txn()
        offs, gid, gen, member, inst = self._offsets_and_group(offsets, group)
        t = self.config["max.block.ms"] / 1000 if timeout is None else timeout
        self._driver.call_wait(
            lambda: txn.send_offsets(offs, gid, gen, member, inst, t),
            t + 1.0,
            f"send_offsets_to_transaction(group {gid!r})",
        )

    def _resume_transaction(self, producer_id: int, producer_epoch: int) -> None:
        """Internal (the Spark sink's driver): take over the open transaction of this
        transactional id that another instance began (see TransactionManager.resume)."""
        txn = self._txn()
        self._driver.call_wait(lambda: txn.resume(producer_id, producer_epoch), 10.0, "resume transaction")

    def _producer_id_and_epoch(self) -> tuple[int, int]:
        return self._core.producer_id, self._core.producer_epoch

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Sends every queued record, then commits; raises if any record failed (abort then)."""
        txn = self._txn()
        t = self.config["max.block.ms"] / 1000 if timeout is None else timeout
        self._driver.call_wait(lambda: txn.end(True, t), t + 1.0, "commit_transaction")

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Drops unsent records (their futures fail), waits for those in flight, aborts."""
        txn = self._txn()
        t = self.config["max.block.ms"] / 1000 if timeout is None else timeout
        self._driver.call_wait(lambda: txn.end(False, t), t + 1.0, "abort_transaction")

    def partitions_for(self, topic: str, timeout: float | None = None) -> list[int]:
        """The topic's partition ids (waits for metadata)."""
        t = self.config["max.block.ms"] / 1000 if timeout is None else timeout
        self._driver.call_wait(lambda: self._core.wait_for_topic(topic, t), t + 1.0, f"metadata of topic {topic!r}")
        return list(range(self._acc.partitions(topic) or 0))

    def close(self, timeout: float | None = None) -> None:
        """Flushes (up to `timeout`), then stops the I/O thread; records still unsent fail
        with ClientClosedError. Idempotent."""
        if self._closed:
            return
        try:
            if self._driver.alive:
                self._acc.begin_flush()
                self._acc.wait_idle(timeout)
        finally:
            self._closed = True
            self._driver.stop(5.0)

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if not getattr(self, "_closed", True) and hasattr(self, "_driver"):  # not half-built (a bad config)
            self._closed = True
            self._driver.stop(0)
