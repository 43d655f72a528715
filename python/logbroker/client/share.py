"""`ShareConsumer`: the sync consumer of a share group (KIP-932, Kafka's KafkaShareConsumer).
Members of a share group share partitions: the broker hands each record to one member at a
time (acquisition, under a lock of group.share.record.lock.duration.ms), and the member
acknowledges it: ACCEPT (done), RELEASE (deliver again, to anyone) or REJECT (never again).
Records not acknowledged before their lock runs out come back with a higher delivery
count; past the group's delivery count limit they are archived.

    with ShareConsumer("127.0.0.1:9092", "workers") as c:
        c.subscribe(["jobs"])
        while True:
            for record in c.poll(timeout=1.0):
                handle(record)              # implicit mode: accepted at the next poll()

    with ShareConsumer("127.0.0.1:9092", "workers", share_acknowledgement_mode="explicit") as c:
        c.subscribe(["jobs"])
        for record in c.poll(1.0):
            c.acknowledge(record, AcknowledgeType.ACCEPT if ok(record) else AcknowledgeType.RELEASE)
        c.commit_sync()                     # or let the next poll() carry them

# Acknowledgement modes (share.acknowledgement.mode)
- implicit (default): every record a poll() returned is accepted by the next poll(),
  commit_sync(), commit_async() or close(); acknowledge() raises IllegalStateError.
- explicit: each record of a poll must be acknowledged (acknowledge()) before the next
  poll(), which raises IllegalStateError otherwise (as Kafka does). close() releases what
  was left unacknowledged (the broker hands it back when the share session closes).

Acknowledgements ride on the next ShareFetch to the partition's leader (poll()), or go at
once in ShareAcknowledge requests (commit_sync(), commit_async(), close()), whose results
are returned / passed to the callback per partition: None, or the error (e.g.
InvalidRecordStateError when a record's lock ran out and it went to another member).
Results of acknowledgements that rode on fetches go to the acknowledgement commit callback
(`set_acknowledgement_commit_callback`). Callbacks run in the application's thread, inside
poll(), commit_sync() and close().

Records carry `delivery_count` (1 on the first delivery). The background thread
(`driver.py`) runs membership, share sessions and fetches (`share_consumer.py`).
Thread-safety: one application thread polls and acknowledges, as in Kafka.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from logbroker import _core
from logbroker.client import config as _config
from logbroker.client.driver import ThreadDriver
from logbroker.client.errors import ClientClosedError, KafkaError
from logbroker.client.group import TopicPartition
from logbroker.client.share_consumer import (
    AckMap,
    AcknowledgeType,
    AckResults,
    IllegalStateError,
    ShareConsumerCore,
)

__all__ = [
    "AckResults",
    "AcknowledgeType",
    "AcknowledgementCommitCallback",
    "IllegalStateError",
    "ShareConsumer",
    "ShareConsumerBase",
]

AcknowledgementCommitCallback = Callable[[AckResults], object]
"""Called with {TopicPartition: None or the error} when acknowledgements completed."""


class ShareConsumerBase:
    """What the sync and async share consumers share: configuration, the core, and the
    application side of acknowledgements (see the module docstring)."""

    def __init__(self, bootstrap_servers: str | list[str], group_id: str | None, config: dict[str, Any]) -> None:
        self.config = _config.build_share_consumer(
            {"bootstrap.servers": bootstrap_servers, "group.id": group_id, **config}
        )
        self._core = ShareConsumerCore(self.config)
        self._explicit = self.config["share.acknowledgement.mode"] == "explicit"
        self.max_poll_records: int = self.config["max.poll.records"]
        self._timeout: float = self.config["request.timeout.ms"] / 1000
        self._closed = False
        self._last: list[_core.ConsumerRecord] = []  # implicit mode: the last poll's records
        self._unacked: dict[tuple[str, int, int], _core.ConsumerRecord] = {}  # explicit mode
        self._renewed: dict[tuple[str, int, int], _core.ConsumerRecord] = {}  # RENEWed, to acknowledge later
        self._acks: AckMap = {}  # acknowledged, not yet handed to the core
        self._ack_callback: AcknowledgementCommitCallback | None = None

    # -- acknowledgements (application side) --------------------------------------------

    def acknowledge(
        self,
        record: _core.ConsumerRecord,
        type: AcknowledgeType | str = AcknowledgeType.ACCEPT,
        delay_ms: int | None = None,
    ) -> None:
        """Acknowledges `record` (from the last poll()) as ACCEPT, RELEASE, REJECT or RENEW
        (also by name: "accept", "release", ...); sent with the next poll(), commit_sync(),
        commit_async() or close(). Explicit mode only.

        RELEASE with `delay_ms` (logbroker's brokers): the record is handed out again no
        sooner than that (a retry with back-off); without it the group's
        share.release.backoff.ms applies (0: at once). RENEW (KIP-1222) keeps the record's
        lock for another lock duration; the record stays this member's, to acknowledge later."""
        if self._closed:
            raise ClientClosedError("the share consumer is closed")
        if not self._explicit:
            raise IllegalStateError(
                "acknowledge() needs share.acknowledgement.mode=explicit "
                "(in implicit mode every record is accepted by the next poll)"
            )
        t = AcknowledgeType[type.upper()] if isinstance(type, str) else AcknowledgeType(type)
        if delay_ms is not None and (t != AcknowledgeType.RELEASE or delay_ms < 0 or delay_ms > 2**31 - 1):
            raise ValueError(f"delay_ms={delay_ms!r}: a back-off in ms (0 to 2^31-1) goes with RELEASE only")
        key = (record.topic, record.partition, record.offset)
        if self._unacked.pop(key, None) is None and self._renewed.pop(key, None) is None:
            raise IllegalStateError(
                f"{record.topic}-{record.partition}@{record.offset} is not a record of the "
                "last poll() waiting for an acknowledgement"
            )
        if t == AcknowledgeType.RENEW:  # still this member's: acknowledged later, even after a poll()
            self._renewed[key] = record
        kind: int | tuple[int, int] = int(t) if delay_ms is None else (int(t), int(delay_ms))
        self._acks.setdefault(TopicPartition(record.topic, record.partition), {})[record.offset] = kind

    def set_acknowledgement_commit_callback(self, callback: AcknowledgementCommitCallback | None) -> None:
        """`callback(results)` learns what became of acknowledgements sent with fetches (and
        by commit_async() without a callback of its own); it runs inside poll(),
        commit_sync() and close()."""
        self._ack_callback = callback

    def _check_explicit(self) -> None:
        if self._explicit and self._unacked:
            n = len(self._unacked)
            raise IllegalStateError(
                f"{n} record(s) of the last poll() are not acknowledged: in explicit mode every "
                "record must be acknowledged before the next poll()"
            )

    def _take_acks(self) -> AckMap:
        """The acknowledgements to hand to the core: in implicit mode the last poll's
        records, accepted."""
        if not self._explicit and self._last:
            accept = int(AcknowledgeType.ACCEPT)
            for r in self._last:
                self._acks.setdefault(TopicPartition(r.topic, r.partition), {})[r.offset] = accept
            self._last = []
        out, self._acks = self._acks, {}
        return out

    def _delivered(self, records: list[_core.ConsumerRecord]) -> None:
        if self._explicit:
            self._unacked = {(r.topic, r.partition, r.offset): r for r in records}
        else:
            self._last = records

    def _drop_unacked(self) -> None:
        """close(): what explicit mode left unacknowledged goes back with the session close."""
        self._unacked = {}

    def _run_callbacks(self) -> None:
        core = self._core
        while core.callbacks:
            cb, results = core.callbacks.popleft()
            cb = cb or self._ack_callback
            if cb is not None:
                cb(results)
        while core.ack_results:
            results = core.ack_results.popleft()
            if self._ack_callback is not None:
                self._ack_callback(results)

    def _raise_error(self) -> None:
        if self._core.errors:
            raise self._core.errors.popleft()

    def subscription(self) -> list[str]:
        """The topics subscribed to."""
        g = self._core.group
        return list(g.subscribed) if g.active else []

    def assignment(self) -> list[TopicPartition]:
        """The partitions the group assigned this member (shared with other members)."""
        return sorted(self._core.assignment)

    @property
    def member_id(self) -> str:
        """This member's id in the group (generated by the client)."""
        return self._core.group.member_id


class ShareConsumer(ShareConsumerBase):
    """A share-group consumer, Kafka's KafkaShareConsumer (see the module docstring;
    configuration keys as in Kafka, underscores allowed: docs/client.md)."""

    def __init__(
        self, bootstrap_servers: str | list[str] = "127.0.0.1:9092", group_id: str | None = None, **config: Any
    ) -> None:
        super().__init__(bootstrap_servers, group_id, config)
        self._data = threading.Event()
        self._core.notify = self._data.set
        self._driver = ThreadDriver(self._core, "logbroker-share-consumer")

    def _call(self, fn: Callable[[], Any], what: str, timeout: float | None = None) -> Any:
        if self._closed:
            raise ClientClosedError("the share consumer is closed")
        return self._driver.call_wait(fn, self._timeout if timeout is None else timeout, what)

    def subscribe(self, topics: Iterable[str] | str) -> None:
        """Joins the share group for `topics` (replacing an earlier subscription)."""
        names = [topics] if isinstance(topics, str) else list(topics)
        self._call(lambda: self._core.subscribe(names), "subscribe")

    def unsubscribe(self) -> None:
        """Leaves the group; acknowledgements made so far are still sent."""
        acks = self._take_acks()
        core = self._core

        def leave() -> Any:
            core.polled(acks)
            return core.unsubscribe()

        self._call(leave, "unsubscribe")

    def poll(self, timeout: float | None = 0.0) -> list[_core.ConsumerRecord]:
        """Up to max.poll.records acquired records, waiting up to `timeout` seconds (forever
        with None) for the first. Acknowledges the last poll's records first (implicit mode)
        or raises IllegalStateError if some are unacknowledged (explicit mode); runs
        acknowledgement callbacks; raises errors the background thread met."""
        if self._closed:
            raise ClientClosedError("the share consumer is closed")
        self._run_callbacks()
        self._check_explicit()
        deadline = None if timeout is None else time.monotonic() + timeout
        core = self._core
        acks = self._take_acks()
        recs = core.take_records(self.max_poll_records)
        if recs:
            # records were waiting: no fetch (as in Kafka's client); the acknowledgements go
            # on their own
            if acks:
                self._driver.submit(lambda: core.acknowledge_async(acks))
            self._delivered(recs)
            return recs
        self._driver.submit(lambda: core.polled(acks))
        while True:
            self._raise_error()
            self._data.clear()
            recs = core.take_records(self.max_poll_records)
            if recs:
                self._delivered(recs)
                return recs
            if core.errors or core.ack_results or core.callbacks:
                self._run_callbacks()
                if core.errors:
                    continue
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return []
            self._data.wait(left)

    def __iter__(self) -> Iterator[_core.ConsumerRecord]:
        """Records forever (until close()), polling in batches (implicit mode)."""
        while not self._closed:
            try:
                batch = self.poll(0.5)
            except ClientClosedError:
                return
            yield from batch

    def commit_sync(self, timeout: float | None = None) -> AckResults:
        """Sends the acknowledgements made so far (implicit mode: the last poll's records,
        accepted) and waits for them: {TopicPartition: None or the error}."""
        if self._closed:
            raise ClientClosedError("the share consumer is closed")
        self._run_callbacks()
        t = self._timeout if timeout is None else timeout
        acks = self._take_acks()
        results: AckResults = self._call(lambda: self._core.commit(acks, t), "commit_sync", t + 1.0)
        self._run_callbacks()
        return results

    def commit_async(self, callback: AcknowledgementCommitCallback | None = None) -> None:
        """Sends the acknowledgements made so far without waiting; `callback(results)` (or the
        acknowledgement commit callback) runs inside a later poll(), commit_sync() or close()."""
        if self._closed:
            raise ClientClosedError("the share consumer is closed")
        acks = self._take_acks()
        core = self._core

        def done(p: Any) -> None:
            err = p.error if p.error is None or isinstance(p.error, KafkaError) else KafkaError(str(p.error))
            results: AckResults = p.result() if err is None else {tp: err for tp in acks}
            core.callbacks.append((callback, results))
            core.notify()

        self._driver.submit(lambda: core.commit(acks, self._timeout)).add_callback(done)

    def close(self, timeout: float | None = None) -> None:
        """Sends the last acknowledgements, closes the share sessions (what is still held
        goes back to the group), leaves the group and stops the background thread. Idempotent."""
        if self._closed:
            return
        t = 30.0 if timeout is None else timeout
        try:
            if self._driver.alive:
                self._drop_unacked()
                acks = self._take_acks()
                try:
                    self._driver.call_wait(lambda: self._core.close_share(acks, t), t + 1.0, "close")
                except KafkaError:
                    pass
            self._run_callbacks()
        finally:
            self._closed = True
            self._driver.stop(5.0)
            self._data.set()

    def __enter__(self) -> ShareConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if not getattr(self, "_closed", True) and hasattr(self, "_driver"):
            self._closed = True
            self._driver.stop(0)
