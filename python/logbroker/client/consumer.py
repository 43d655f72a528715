"""`Consumer`: the sync Kafka consumer. Fetching, decoding (Rust), group membership and
heartbeats run in a background thread (`driver.py` + `fetcher.py`); `poll()` hands out
ready `ConsumerRecord`s in bulk and runs rebalance callbacks in the caller's thread.

    with Consumer(bootstrap_servers="127.0.0.1:9092", group_id="g", auto_offset_reset="earliest") as c:
        c.subscribe(["events"])
        for record in c:                  # or: c.poll(timeout=1.0, max_records=500)
            print(record.offset, record.key, record.value)

Thread-safety: one application thread polls (as in Kafka); the other methods may be called
from any thread.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from logbroker import _core
from logbroker.client import config as _config
from logbroker.client.driver import ThreadDriver
from logbroker.client.errors import ClientClosedError, ConfigError, KafkaError, KafkaTimeoutError
from logbroker.client.fetcher import EARLIEST, LATEST, ConsumerCore
from logbroker.client.group import TopicPartition

__all__ = ["ConsumerRecord", "Consumer", "OffsetSpec", "RebalanceCallback", "TopicPartition"]

ConsumerRecord = _core.ConsumerRecord
RebalanceCallback = Callable[[list[TopicPartition]], object]
OffsetSpec = int | tuple[int, str | None]


def as_tps(partitions: Iterable[TopicPartition | tuple[str, int]]) -> list[TopicPartition]:
    return [p if isinstance(p, TopicPartition) else TopicPartition(*p) for p in partitions]


def as_offsets(offsets: dict[Any, OffsetSpec]) -> dict[TopicPartition, tuple[int, str | None]]:
    out = {}
    for tp, v in offsets.items():
        out[TopicPartition(*tp)] = (v, None) if isinstance(v, int) else (int(v[0]), v[1])
    return out


class ConsumerBase:
    """What the sync and trio consumers share: config, core, the rebalance callbacks."""

    def __init__(self, bootstrap_servers: str | list[str], group_id: str | None, config: dict[str, Any]) -> None:
        self.config = _config.build(
            _config.CONSUMER, {"bootstrap.servers": bootstrap_servers, "group.id": group_id, **config}
        )
        self._core = ConsumerCore(self.config)
        self._on_assign: RebalanceCallback | None = None
        self._on_revoke: RebalanceCallback | None = None
        self._closed = False
        self.max_poll_records = self.config["max.poll.records"]

    def _check_subscribe(self, topics: Iterable[str] | str | re.Pattern[str]) -> tuple[list[str] | None, Any]:
        if isinstance(topics, re.Pattern):
            return None, topics
        if isinstance(topics, str):
            if topics.startswith("^"):
                return None, topics
            return [topics], None
        return list(topics), None

    def _run_events(self) -> tuple[bool, BaseException | None]:
        """Runs queued rebalance callbacks; returns (revoke acknowledged needed, first error)."""
        core = self._core
        revoked = False
        while core.events:
            kind, tps = core.events.popleft()
            cb = self._on_assign if kind == "assign" else self._on_revoke
            if kind == "revoke":
                revoked = True
            if cb is not None:
                cb(tps)
        err = core.errors.popleft() if core.errors else None
        return revoked, err


class Consumer(ConsumerBase):
    """A Kafka consumer (configuration keys as in Kafka: see docs/client.md)."""

    def __init__(
        self, bootstrap_servers: str | list[str] = "127.0.0.1:9092", group_id: str | None = None, **config: Any
    ) -> None:
        super().__init__(bootstrap_servers, group_id, config)
        self._data = threading.Event()
        self._core.notify = self._data.set
        self._driver = ThreadDriver(self._core, "logbroker-consumer")
        self._timeout = self.config["request.timeout.ms"] / 1000

    def _call(self, fn: Callable[[], Any], what: str, timeout: float | None = None) -> Any:
        if self._closed:
            raise ClientClosedError("the consumer is closed")
        return self._driver.call_wait(fn, self._timeout if timeout is None else timeout, what)

    # -- subscription -------------------------------------------------------------------

    def subscribe(
        self,
        topics: Iterable[str] | str | re.Pattern[str],
        on_assign: RebalanceCallback | None = None,
        on_revoke: RebalanceCallback | None = None,
    ) -> None:
        """Joins the group for `topics` (a list, or a regex pattern: a compiled pattern or a
        string starting with '^'). `on_assign(partitions)` / `on_revoke(partitions)` run in
        the thread that calls `poll()`; `on_revoke` also runs for partitions lost when the
        application went longer than max.poll.interval.ms without polling."""
        names, pattern = self._check_subscribe(topics)
        self._on_assign, self._on_revoke = on_assign, on_revoke
        self._core.polled()
        self._call(lambda: self._core.subscribe(names, pattern, on_revoke is not None), "subscribe")

    def unsubscribe(self) -> None:
        """Leaves the group's subscription: the assignment is revoked (on_revoke runs at the next poll)
        and nothing is fetched."""
        self._call(self._core.unsubscribe, "unsubscribe")

    def subscription(self) -> list[str]:
        """The topics subscribed to (empty when not subscribed)."""
        g = self._core.group
        return list(g.subscribed) if g is not None and g.active else []

    def assign(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        """Consumes exactly these partitions (no group membership)."""
        tps = as_tps(partitions)
        self._call(lambda: self._core.assign(tps), "assign")

    def assignment(self) -> list[TopicPartition]:
        """The partitions currently assigned to this consumer, sorted."""
        return sorted(self._core.assignment)

    # -- consuming ----------------------------------------------------------------------

    def poll(self, timeout: float | None = 0.0, max_records: int | None = None) -> list[ConsumerRecord]:
        """Up to `max_records` (max.poll.records) records, waiting up to `timeout` seconds
        (forever with None) for the first. Runs rebalance callbacks first; raises errors the
        background thread met (corrupt data, no offset with auto.offset.reset=none)."""
        if self._closed:
            raise ClientClosedError("the consumer is closed")
        n = self.max_poll_records if max_records is None else max_records
        deadline = None if timeout is None else time.monotonic() + timeout
        core = self._core
        if core.polled():
            self._driver.submit(core.rejoin_after_poll_timeout)
        while True:
            self._data.clear()
            if core.events or core.errors:
                revoked, err = self._run_events()
                if revoked and core.wait_for_app_on_revoke:
                    self._driver.submit(core.finish_revoke)
                if err is not None:
                    raise err
            recs = core.take_records(n)
            if recs:
                return recs
            if core.ready or core.events or core.errors:
                continue
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return []
            self._data.wait(left)

    def __iter__(self) -> Iterator[ConsumerRecord]:
        """Records forever (until close()), polling in batches."""
        while not self._closed:
            try:
                batch = self.poll(0.5)
            except ClientClosedError:
                return
            yield from batch

    # -- positions ----------------------------------------------------------------------

    def seek(self, partition: TopicPartition | tuple[str, int], offset: int) -> None:
        """Moves the partition's position: the next poll() returns records from `offset` on."""
        tp = TopicPartition(*partition)
        self._call(lambda: self._core.seek(tp, offset), "seek")

    def seek_to_beginning(self, partitions: Iterable[TopicPartition | tuple[str, int]] | None = None) -> None:
        """Moves the partitions' positions (all assigned when None) to their log start offsets."""
        tps = as_tps(partitions or [])
        self._call(lambda: self._core.seek_to(tps, EARLIEST), "seek_to_beginning")

    def seek_to_end(self, partitions: Iterable[TopicPartition | tuple[str, int]] | None = None) -> None:
        """Moves the partitions' positions (all assigned when None) to their ends (the last stable
        offset under read_committed)."""
        tps = as_tps(partitions or [])
        self._call(lambda: self._core.seek_to(tps, LATEST), "seek_to_end")

    def position(self, partition: TopicPartition | tuple[str, int], timeout: float | None = None) -> int:
        """The offset of the next record poll() returns (waits for an offset reset)."""
        tp = TopicPartition(*partition)
        st = self._core.assignment.get(tp)
        if st is None:
            raise KafkaError(f"{tp.topic}-{tp.partition} is not assigned to this consumer")
        deadline = time.monotonic() + (self._timeout if timeout is None else timeout)
        while st.position is None:
            if st.error is not None:
                raise st.error
            if time.monotonic() > deadline:
                raise KafkaTimeoutError(f"position of {tp.topic}-{tp.partition} not known within the timeout")
            time.sleep(0.005)
        return st.position

    def committed(
        self, partitions: Iterable[TopicPartition | tuple[str, int]], timeout: float | None = None
    ) -> dict[TopicPartition, int | None]:
        """The group's committed offsets (None where nothing is committed)."""
        tps = as_tps(partitions)
        got = self._call(lambda: self._core.fetch_committed(tps), "committed", timeout)
        return {tp: (got[tp][0] if tp in got and got[tp][0] >= 0 else None) for tp in tps}

    def commit(
        self,
        offsets: dict[Any, OffsetSpec] | None = None,
        asynchronous: bool = False,
        callback: Callable[[BaseException | None], object] | None = None,
    ) -> None:
        """Commits `offsets` ({TopicPartition: offset or (offset, metadata)}; by default the
        current positions). Sync by default; `asynchronous=True` returns at once and calls
        `callback(error_or_None)` from the background thread when done."""
        core = self._core
        fn: Callable[[], Any]
        if offsets is None:
            fn = core.commit_positions
        else:
            o = as_offsets(offsets)
            fn = lambda: core.commit(o)  # noqa: E731
        if asynchronous:
            p = self._driver.submit(fn)
            if callback is not None:
                p.add_callback(lambda q: callback(q.error))
            return
        self._call(fn, "commit")

    def pause(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        """Stops fetching the partitions until resume(); their positions stay."""
        tps = as_tps(partitions)
        self._call(lambda: self._core.pause(tps, True), "pause")

    def resume(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        """Fetches the paused partitions again."""
        tps = as_tps(partitions)
        self._call(lambda: self._core.pause(tps, False), "resume")

    def paused(self) -> list[TopicPartition]:
        """The partitions paused with pause(), sorted."""
        return sorted(tp for tp, st in self._core.assignment.items() if st.paused)

    def topics(self, timeout: float | None = None) -> dict[str, int]:
        """Every topic in the cluster with its partition count."""
        core = self._core

        def ask() -> Any:
            core.metadata.all_topics = True
            v = core.metadata.all_version
            return core.wait_metadata(lambda: core.metadata.all_version > v, self._timeout, "topic list")

        self._call(ask, "topics", timeout)
        return {t: len(m.partitions) for t, m in core.metadata.topics.items() if m.error_code == 0}

    def close(self, timeout: float | None = None) -> None:
        """Commits (auto-commit), leaves the group and stops the background thread. Idempotent."""
        if self._closed:
            return
        try:
            if self._driver.alive:
                try:
                    self._driver.call_wait(self._core.close_group, 10.0 if timeout is None else timeout, "close")
                except KafkaError:
                    pass
        finally:
            self._closed = True
            self._driver.stop(5.0)
            self._data.set()

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if not getattr(self, "_closed", True) and hasattr(self, "_driver"):  # not half-built (a bad config)
            self._closed = True
            self._driver.stop(0)


def _unused() -> None:  # keep ConfigError imported for re-export users
    raise ConfigError
