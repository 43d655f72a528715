"""Async Producer, Consumer and Admin for asyncio and trio alike: the same sans-I/O cores as
the sync API (`logbroker.client`), driven by tasks of the caller's event loop (through anyio)
instead of a background thread. The same code runs under `asyncio.run(main())` and
`trio.run(main)`.

    async with logbroker.aio.Producer(bootstrap_servers=...) as producer:
        meta = await producer.send("events", b"payload")          # waits for the ack
        fut = await producer.enqueue("events", b"more")           # waits only for room
        await producer.flush()

    async with logbroker.aio.Consumer(bootstrap_servers=..., group_id="g") as consumer:
        await consumer.subscribe(["events"])
        async for record in consumer:
            ...

# Structure
`AsyncDriver.run()` (client/async_driver.py) is the loop: it ticks the core, starts one task
per broker connection (a reader, plus a writer woken when the core queued bytes) and sleeps on
the core's waker fd or its next deadline. `async with` opens a task group for it and closes it
on exit; `run(task_status=...)` is there for callers who own the task group or nursery
(`await tg.start(client.run)`, then `await client.aclose()`).

Everything runs in the caller's loop thread: public methods call the core directly and
await its `Pending` results through an `anyio.Event`; every wait has a visible timeout
that raises `KafkaTimeoutError` naming the operation. `aclose()` is idempotent.
"""

from __future__ import annotations

import datetime
import inspect
import re
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import anyio
import anyio.abc

from logbroker import _core
from logbroker.client import config as _config
from logbroker.client.admin import new_topics, offset_specs
from logbroker.client.admin_core import AdminCore, ClusterInfo, GroupDescription, NewTopic, TopicDescription
from logbroker.client.async_driver import AsyncDriver, LoopShare, soon_in_loop, wait_pending
from logbroker.client.consumer import ConsumerBase, OffsetSpec, RebalanceCallback, as_offsets, as_tps
from logbroker.client.errors import ClientClosedError, KafkaError, KafkaTimeoutError
from logbroker.client.fetcher import EARLIEST, LATEST
from logbroker.client.group import TopicPartition
from logbroker.client.network import Pending
from logbroker.client.producer import Headers, ProducerBase
from logbroker.client.share import AcknowledgementCommitCallback, ShareConsumerBase
from logbroker.client.share_consumer import AckResults
from logbroker.deliver_at import with_deliver_at

__all__ = ["Admin", "Consumer", "NewTopic", "Producer", "ShareConsumer", "TopicPartition", "delivered"]

T = TypeVar("T")

# The async Consumer's default max.partition.fetch.bytes (the sync one's is 8 MiB).
ASYNC_MAX_PARTITION_FETCH_BYTES = 1 << 20


class _AioClient:
    _core: Any
    _timeout: float

    def _init_driver(self) -> None:
        self._driver = AsyncDriver(self._core)
        self._share = LoopShare()
        self._nursery_cm: Any = None
        self._aclosed = False

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """The client's loop, for a caller-owned task group: `await tg.start(client.run)`."""
        await self._driver.run(task_status=task_status)

    async def __aenter__(self) -> Any:
        self._nursery_cm = anyio.create_task_group()
        tg = await self._nursery_cm.__aenter__()
        await tg.start(self._driver.run)
        return self

    async def __aexit__(self, *exc: Any) -> None:
        try:
            with anyio.move_on_after(10):
                await self.aclose()
        finally:
            self._driver.stop()
            if self._nursery_cm is not None:
                cm, self._nursery_cm = self._nursery_cm, None
                await cm.__aexit__(*exc)

    async def aclose(self) -> None:
        """Stops the client's loop and closes its connections (idempotent; `async with` calls it)."""
        self._aclosed = True
        self._driver.stop()

    def _check(self) -> None:
        if self._aclosed or not self._driver.running:
            raise ClientClosedError("the client is closed (or not started: use `async with`)")

    async def _call(self, fn: Callable[[], Pending[T] | None], what: str, timeout: float | None = None) -> T | None:
        """Runs `fn` (a core call) and awaits its result, if it has one to wait for."""
        self._check()
        p = fn()
        self._core.wake()
        if p is None:
            return None
        return await self._wait(p, what, timeout)

    async def _ask(self, fn: Callable[[], Pending[T]], what: str, timeout: float | None = None) -> T:
        """As `_call`, for a core call that always answers with a Pending."""
        self._check()
        p = fn()
        self._core.wake()
        return await self._wait(p, what, timeout)

    async def _wait(self, p: Pending[T], what: str, timeout: float | None) -> T:
        result: T = await wait_pending(p, self._timeout if timeout is None else timeout, what)
        return result


class Producer(ProducerBase, _AioClient):
    """The async producer: `await send()` for one acknowledged record, `await enqueue()` +
    `await flush()` for throughput."""

    def __init__(self, bootstrap_servers: str | list[str] = "127.0.0.1:9092", **config: Any) -> None:
        ProducerBase.__init__(self, bootstrap_servers, config)
        self._init_driver()
        self._timeout = self.config["request.timeout.ms"] / 1000

    async def enqueue(
        self,
        topic: str,
        value: bytes | str | None = None,
        key: bytes | str | None = None,
        partition: int | None = None,
        headers: Headers = None,
        timestamp: int | None = None,
        deliver_at: int | datetime.datetime | datetime.timedelta | None = None,
    ) -> _core.RecordFuture:
        """Queues a record (waiting for metadata or buffer room, up to max.block.ms); returns its
        future. `deliver_at`: as `logbroker.Producer.send`'s (delayed delivery to share groups)."""
        if deliver_at is not None:
            headers = with_deliver_at(headers, deliver_at)
        self._check()
        await self._share.checkpoint()
        fut = self._append(topic, value, key, partition, timestamp, headers)
        if fut is not None:
            return fut
        max_block = self.config["max.block.ms"] / 1000
        with anyio.move_on_after(max_block) as scope:
            while True:
                if self._acc.partitions(topic) is None:
                    pending = self._core.wait_for_topic(topic, max_block)
                    self._core.wake()  # the I/O task may be asleep until a later deadline
                    await wait_pending(pending, max_block + 1, f"metadata of topic {topic!r}")
                else:
                    self._acc.begin_flush()
                    await anyio.sleep(0.005)
                fut = self._append(topic, value, key, partition, timestamp, headers)
                if fut is not None:
                    return fut
        assert scope.cancelled_caught
        raise KafkaTimeoutError(
            f"send to {topic!r}: no {self._why_blocked(topic)} within max.block.ms={max_block * 1000:.0f}"
        )

    async def send(
        self,
        topic: str,
        value: bytes | str | None = None,
        key: bytes | str | None = None,
        partition: int | None = None,
        headers: Headers = None,
        timestamp: int | None = None,
        timeout: float | None = None,
        deliver_at: int | datetime.datetime | datetime.timedelta | None = None,
    ) -> _core.RecordMetadata:
        """Sends one record and waits for its acknowledgement (delivery.timeout.ms by default)."""
        fut = await self.enqueue(topic, value, key, partition, headers, timestamp, deliver_at)
        return await delivered(fut, self.config["delivery.timeout.ms"] / 1000 if timeout is None else timeout)

    async def flush(self, timeout: float | None = None) -> None:
        """Sends every queued record now and waits until all are acknowledged or failed (up to
        `timeout` seconds)."""
        self._check()
        self._acc.begin_flush()
        await wait_pending(self._core.wait_idle(), timeout, f"flush of {self._acc.incomplete} record(s)")

    async def partitions_for(self, topic: str, timeout: float | None = None) -> list[int]:
        """The partition ids of `topic` (waiting for its metadata up to max.block.ms or `timeout`)."""
        t = self.config["max.block.ms"] / 1000 if timeout is None else timeout
        await self._call(lambda: self._core.wait_for_topic(topic, t), f"metadata of topic {topic!r}", t + 1)
        return list(range(self._acc.partitions(topic) or 0))

    # -- transactions (as the sync Producer's) ------------------------------------------

    def _t(self, timeout: float | None) -> float:
        return self.config["max.block.ms"] / 1000 if timeout is None else timeout

    async def init_transactions(self, timeout: float | None = None) -> None:
        """Registers the transactional id with its coordinator (fencing older producers with the same
        id); once, before the first transaction."""
        txn, t = self._txn(), self._t(timeout)
        await self._call(lambda: txn.init(t), f"init_transactions({txn.txn_id!r})", t + 1)

    def begin_transaction(self) -> None:
        """Starts a transaction: records sent until commit_transaction() or abort_transaction() belong
        to it."""
        self._txn().begin()

    async def send_offsets_to_transaction(self, offsets: Any, group: Any, timeout: float | None = None) -> None:
        """Adds a consumer group's offsets to the transaction (committed with it): `group` is a group
        id or a Consumer in its group."""
        txn, t = self._txn(), self._t(timeout)
        offs, gid, gen, member, inst = self._offsets_and_group(offsets, group)
        await self._call(
            lambda: txn.send_offsets(offs, gid, gen, member, inst, t),
            f"send_offsets_to_transaction(group {gid!r})",
            t + 1,
        )

    async def commit_transaction(self, timeout: float | None = None) -> None:
        """Flushes the transaction's records and commits it."""
        txn, t = self._txn(), self._t(timeout)
        await self._call(lambda: txn.end(True, t), "commit_transaction", t + 1)

    async def abort_transaction(self, timeout: float | None = None) -> None:
        """Aborts the transaction: its records are never read by read_committed consumers."""
        txn, t = self._txn(), self._t(timeout)
        await self._call(lambda: txn.end(False, t), "abort_transaction", t + 1)

    async def aclose(self) -> None:
        """Flushes the queued records (up to delivery.timeout.ms), then closes the client."""
        if self._aclosed:
            return
        try:
            if self._driver.running:
                with anyio.move_on_after(self.config["delivery.timeout.ms"] / 1000):
                    await self.flush()
        finally:
            self._closed = True
            await _AioClient.aclose(self)


async def delivered(fut: _core.RecordFuture, timeout: float | None = None) -> _core.RecordMetadata:
    """Awaits a RecordFuture (from the loop's thread; the future may complete in any)."""
    if not fut.done():
        ev = anyio.Event()
        fut.add_done_callback(soon_in_loop(ev.set))
        with anyio.move_on_after(timeout) as scope:
            await ev.wait()
        if scope.cancelled_caught:
            raise KafkaTimeoutError(f"delivery to {fut.topic}-{fut.partition} not acknowledged within {timeout}s")
    return fut.result(0)


class Consumer(ConsumerBase, _AioClient):
    """The async consumer: `await poll()` or `async for record in consumer`. Rebalance
    callbacks may be plain functions or coroutine functions."""

    def __init__(
        self, bootstrap_servers: str | list[str] = "127.0.0.1:9092", group_id: str | None = None, **config: Any
    ) -> None:
        if not {"max.partition.fetch.bytes", "max_partition_fetch_bytes"} & config.keys():
            # A fetch is decoded in the loop's thread in one Rust call (about 1 ms per MiB):
            # Kafka's 1 MiB keeps that under the loop-stall goal, where the sync API's 8 MiB
            # would hold the loop ~8 ms (docs/decisions.md, "logbroker.aio on anyio").
            config["max.partition.fetch.bytes"] = ASYNC_MAX_PARTITION_FETCH_BYTES
        ConsumerBase.__init__(self, bootstrap_servers, group_id, config)
        self._init_driver()
        self._timeout = self.config["request.timeout.ms"] / 1000
        self._data = anyio.Event()
        self._core.notify = self._notify
        self._iter_buffer: list[_core.ConsumerRecord] = []

    def _notify(self) -> None:
        self._data.set()

    async def subscribe(
        self,
        topics: Iterable[str] | str | re.Pattern[str],
        on_assign: RebalanceCallback | None = None,
        on_revoke: RebalanceCallback | None = None,
    ) -> None:
        """Joins the group's subscription to `topics` (names or a regex); rebalance callbacks may be
        coroutine functions."""
        names, pattern = self._check_subscribe(topics)
        self._on_assign, self._on_revoke = on_assign, on_revoke
        self._core.polled()
        await self._call(lambda: self._core.subscribe(names, pattern, on_revoke is not None), "subscribe")

    async def unsubscribe(self) -> None:
        """Leaves the subscription: the assignment is revoked and nothing is fetched."""
        await self._call(self._core.unsubscribe, "unsubscribe")

    def subscription(self) -> list[str]:
        """The topics subscribed to (empty when not subscribed)."""
        g = self._core.group
        return list(g.subscribed) if g is not None and g.active else []

    async def assign(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        """Assigns the partitions by hand (no group membership)."""
        tps = as_tps(partitions)
        await self._call(lambda: self._core.assign(tps), "assign")

    def assignment(self) -> list[TopicPartition]:
        """The partitions currently assigned, sorted."""
        return sorted(self._core.assignment)

    async def _run_events_async(self) -> BaseException | None:
        core = self._core
        revoked = False
        while core.events:
            kind, tps = core.events.popleft()
            cb = self._on_assign if kind == "assign" else self._on_revoke
            revoked |= kind == "revoke"
            if cb is not None:
                r = cb(tps)
                if inspect.isawaitable(r):
                    await r
        if revoked and core.wait_for_app_on_revoke:
            core.finish_revoke()
            core.wake()
        return core.errors.popleft() if core.errors else None

    async def poll(self, timeout: float | None = 0.0, max_records: int | None = None) -> list[_core.ConsumerRecord]:
        """Up to `max_records` records, waiting up to `timeout` seconds for the first."""
        self._check()
        await self._share.checkpoint()
        n = self.max_poll_records if max_records is None else max_records
        core = self._core
        if core.polled():
            core.rejoin_after_poll_timeout()
            core.wake()
        with anyio.move_on_after(timeout):
            while True:
                self._data = anyio.Event()
                if core.events or core.errors:
                    err = await self._run_events_async()
                    if err is not None:
                        raise err
                recs = core.take_records(n)
                if recs:
                    return recs
                if core.ready or core.events or core.errors:
                    continue
                await self._data.wait()
        return []

    def __aiter__(self) -> Consumer:
        return self

    async def __anext__(self) -> _core.ConsumerRecord:
        """The next record (an async iterator, not a generator: breaking out of `async for`
        leaves nothing to finalize)."""
        while not self._iter_buffer:
            if self._aclosed:
                raise StopAsyncIteration
            try:
                self._iter_buffer = (await self.poll(0.5))[::-1]
            except ClientClosedError:
                raise StopAsyncIteration from None
        return self._iter_buffer.pop()

    async def seek(self, partition: TopicPartition | tuple[str, int], offset: int) -> None:
        """Moves the partition's position: the next poll() returns records from `offset` on."""
        tp = TopicPartition(*partition)
        await self._call(lambda: self._core.seek(tp, offset), "seek")

    async def seek_to_beginning(self, partitions: Iterable[TopicPartition | tuple[str, int]] | None = None) -> None:
        """Moves the partitions' positions (all assigned when None) to their log start offsets."""
        tps = as_tps(partitions or [])
        await self._call(lambda: self._core.seek_to(tps, EARLIEST), "seek_to_beginning")

    async def seek_to_end(self, partitions: Iterable[TopicPartition | tuple[str, int]] | None = None) -> None:
        """Moves the partitions' positions (all assigned when None) to their ends."""
        tps = as_tps(partitions or [])
        await self._call(lambda: self._core.seek_to(tps, LATEST), "seek_to_end")

    async def position(self, partition: TopicPartition | tuple[str, int], timeout: float | None = None) -> int:
        """The offset of the next record poll() returns for the partition (waiting up to `timeout`
        seconds for an offset reset)."""
        tp = TopicPartition(*partition)
        st = self._core.assignment.get(tp)
        if st is None:
            raise KafkaError(f"{tp.topic}-{tp.partition} is not assigned to this consumer")
        t = self._timeout if timeout is None else timeout
        with anyio.move_on_after(t):
            while st.position is None:
                if st.error is not None:
                    raise st.error
                await anyio.sleep(0.005)
            return st.position
        raise KafkaTimeoutError(f"position of {tp.topic}-{tp.partition} not known within {t}s")

    async def committed(
        self, partitions: Iterable[TopicPartition | tuple[str, int]], timeout: float | None = None
    ) -> dict[TopicPartition, int | None]:
        """The group's committed offset of each partition (None where nothing is committed)."""
        tps = as_tps(partitions)
        got = await self._ask(lambda: self._core.fetch_committed(tps), "committed", timeout)
        return {tp: (got[tp][0] if tp in got and got[tp][0] >= 0 else None) for tp in tps}

    async def commit(
        self,
        offsets: dict[Any, OffsetSpec] | None = None,
        asynchronous: bool = False,
        callback: Callable[[BaseException | None], object] | None = None,
    ) -> None:
        """Commits (default: current positions); with `asynchronous=True` returns at once and
        calls `callback(error_or_None)` from the loop."""
        self._check()
        core = self._core
        p = core.commit_positions() if offsets is None else core.commit(as_offsets(offsets))
        core.wake()
        if asynchronous:
            if callback is not None:
                p.add_callback(lambda q: callback(q.error))
            return
        await wait_pending(p, self._timeout, "commit")

    async def pause(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        """Stops fetching the partitions until resume(); their positions stay."""
        tps = as_tps(partitions)
        await self._call(lambda: self._core.pause(tps, True), "pause")

    async def resume(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        """Fetches the paused partitions again."""
        tps = as_tps(partitions)
        await self._call(lambda: self._core.pause(tps, False), "resume")

    def paused(self) -> list[TopicPartition]:
        """The partitions paused with pause(), sorted."""
        return sorted(tp for tp, st in self._core.assignment.items() if st.paused)

    async def aclose(self) -> None:
        """Commits (with enable.auto.commit), leaves the group and closes the client."""
        if self._aclosed:
            return
        try:
            if self._driver.running:
                with anyio.move_on_after(10):
                    await wait_pending(self._core.close_group(), 10, "close")
        except KafkaError:
            pass
        finally:
            self._closed = True
            await _AioClient.aclose(self)


class ShareConsumer(ShareConsumerBase, _AioClient):
    """The async share-group consumer (KIP-932): the methods of `logbroker.ShareConsumer`
    (client/share.py), awaited; `await poll()` or `async for record in consumer`.
    Acknowledgement callbacks may be plain functions or coroutine functions; they run
    inside poll(), commit_sync() and aclose()."""

    def __init__(
        self, bootstrap_servers: str | list[str] = "127.0.0.1:9092", group_id: str | None = None, **config: Any
    ) -> None:
        ShareConsumerBase.__init__(self, bootstrap_servers, group_id, config)
        self._init_driver()
        self._data = anyio.Event()
        self._core.notify = self._notify
        self._iter_buffer: list[_core.ConsumerRecord] = []

    def _notify(self) -> None:
        self._data.set()

    async def _run_callbacks_async(self) -> None:
        core = self._core
        while core.callbacks or core.ack_results:
            if core.callbacks:
                cb, results = core.callbacks.popleft()
                cb = cb or self._ack_callback
            else:
                results, cb = core.ack_results.popleft(), self._ack_callback
            if cb is not None:
                r = cb(results)
                if inspect.isawaitable(r):
                    await r

    async def subscribe(self, topics: Iterable[str] | str) -> None:
        """Joins the share group for `topics` (replacing an earlier subscription)."""
        names = [topics] if isinstance(topics, str) else list(topics)
        await self._call(lambda: self._core.subscribe(names), "subscribe")

    async def unsubscribe(self) -> None:
        """Leaves the group; acknowledgements made so far are still sent."""
        acks = self._take_acks()
        core = self._core

        def leave() -> Any:
            core.polled(acks)
            return core.unsubscribe()

        await self._call(leave, "unsubscribe")

    async def poll(self, timeout: float | None = 0.0) -> list[_core.ConsumerRecord]:
        """Up to max.poll.records acquired records, waiting up to `timeout` seconds (forever
        with None) for the first; acknowledges as `logbroker.ShareConsumer.poll` does."""
        self._check()
        await self._share.checkpoint()
        await self._run_callbacks_async()
        self._check_explicit()
        core = self._core
        n = self.max_poll_records
        acks = self._take_acks()
        recs = core.take_records(n)
        if recs:
            if acks:
                core.acknowledge_async(acks)
            self._delivered(recs)
            return recs
        core.polled(acks)
        with anyio.move_on_after(timeout):
            while True:
                self._data = anyio.Event()
                if core.errors:
                    raise core.errors.popleft()
                recs = core.take_records(n)
                if recs:
                    self._delivered(recs)
                    return recs
                if core.callbacks or core.ack_results:
                    await self._run_callbacks_async()
                    continue
                await self._data.wait()
        return []

    def __aiter__(self) -> ShareConsumer:
        return self

    async def __anext__(self) -> _core.ConsumerRecord:
        """The next record (implicit mode: each batch is accepted at the next poll)."""
        while not self._iter_buffer:
            if self._aclosed:
                raise StopAsyncIteration
            try:
                self._iter_buffer = (await self.poll(0.5))[::-1]
            except ClientClosedError:
                raise StopAsyncIteration from None
        return self._iter_buffer.pop()

    async def commit_sync(self, timeout: float | None = None) -> AckResults:
        """Sends the acknowledgements made so far and waits for them: {TopicPartition: None
        or the error}."""
        self._check()
        await self._run_callbacks_async()
        t = self._timeout if timeout is None else timeout
        acks = self._take_acks()
        results: AckResults = await self._ask(lambda: self._core.commit(acks, t), "commit_sync", t + 1.0)
        await self._run_callbacks_async()
        return results

    def commit_async(self, callback: AcknowledgementCommitCallback | None = None) -> None:
        """Sends the acknowledgements made so far without waiting; `callback(results)` (or the
        acknowledgement commit callback) runs inside a later poll(), commit_sync() or aclose()."""
        self._check()
        acks = self._take_acks()
        core = self._core

        def done(p: Pending[AckResults]) -> None:
            err = p.error if p.error is None or isinstance(p.error, KafkaError) else KafkaError(str(p.error))
            results: AckResults = p.result() if err is None else {tp: err for tp in acks}
            core.callbacks.append((callback, results))
            core.notify()

        core.commit(acks, self._timeout).add_callback(done)
        core.wake()

    async def aclose(self) -> None:
        """Sends the last acknowledgements, closes the share sessions, leaves the group and
        stops the loop. Idempotent."""
        if self._aclosed:
            return
        try:
            if self._driver.running:
                self._drop_unacked()
                acks = self._take_acks()
                with anyio.move_on_after(10):
                    await wait_pending(self._core.close_share(acks, 9.0), 10, "close")
                await self._run_callbacks_async()
        except KafkaError:
            pass
        finally:
            self._closed = True
            await _AioClient.aclose(self)


class Admin(_AioClient):
    """The async admin client: the methods of `logbroker.Admin`, awaited."""

    def __init__(self, bootstrap_servers: str | list[str] = "127.0.0.1:9092", **config: Any) -> None:
        self.config = _config.build(_config.ADMIN, {"bootstrap.servers": bootstrap_servers, **config})
        self._core = AdminCore(self.config)
        self._timeout = self.config["request.timeout.ms"] / 1000
        self._init_driver()

    def _ms(self, timeout: float | None) -> int:
        return int((self._timeout if timeout is None else timeout) * 1000)

    async def create_topics(
        self, topics: Iterable[NewTopic | str], timeout: float | None = None, validate_only: bool = False
    ) -> None:
        """Creates topics (names get the broker's default partition count and replication factor);
        raises on any topic's error."""
        ts = new_topics(topics)
        core = self._core
        assert isinstance(core, AdminCore)
        await self._call(lambda: core.create_topics(ts, self._ms(timeout), validate_only), "create_topics", timeout)

    async def delete_topics(self, names: Iterable[str], timeout: float | None = None) -> None:
        """Deletes the named topics; raises on any topic's error."""
        ns = list(names)
        await self._call(lambda: self._admin.delete_topics(ns, self._ms(timeout)), "delete_topics", timeout)

    @property
    def _admin(self) -> AdminCore:
        assert isinstance(self._core, AdminCore)
        return self._core

    async def describe_topics(
        self, names: Iterable[str] | None = None, timeout: float | None = None
    ) -> dict[str, TopicDescription]:
        """Partitions, leaders, replicas and ISR of the named topics (all topics when None), by name."""
        ns = None if names is None else list(names)
        return await self._ask(lambda: self._admin.describe_topics(ns), "describe_topics", timeout)

    async def list_topics(self, timeout: float | None = None) -> list[str]:
        """The names of all topics, sorted."""
        return sorted(await self.describe_topics(None, timeout))

    async def create_partitions(
        self, counts: dict[str, int], timeout: float | None = None, validate_only: bool = False
    ) -> None:
        """Grows each topic to the given total partition count."""
        await self._call(
            lambda: self._admin.create_partitions(dict(counts), self._ms(timeout), validate_only),
            "create_partitions",
            timeout,
        )

    async def describe_configs(
        self, resources: Iterable[tuple[str, str]], timeout: float | None = None
    ) -> dict[tuple[str, str], dict[str, str | None]]:
        """The configs of each (resource type, name): ("topic", name) or ("broker", id)."""
        rs = list(resources)
        return await self._ask(lambda: self._admin.describe_configs(rs), "describe_configs", timeout)

    async def alter_configs(
        self,
        changes: dict[tuple[str, str], dict[str, str | None]],
        timeout: float | None = None,
        validate_only: bool = False,
    ) -> None:
        """Incremental: sets each key, or deletes it (back to the default) when the value is None."""
        await self._call(lambda: self._admin.alter_configs(changes, validate_only), "alter_configs", timeout)

    async def list_groups(self, timeout: float | None = None) -> list[tuple[str, str, str]]:
        """(group id, protocol type, state) of every group."""
        return await self._ask(self._admin.list_groups, "list_groups", timeout)

    async def describe_groups(
        self, group_ids: Iterable[str], timeout: float | None = None
    ) -> dict[str, GroupDescription]:
        """State, protocol and members of each named group, by group id."""
        gs = list(group_ids)
        return await self._ask(lambda: self._admin.describe_groups(gs), "describe_groups", timeout)

    async def delete_groups(self, group_ids: Iterable[str], timeout: float | None = None) -> None:
        """Deletes the named (empty) groups; raises on any group's error."""
        gs = list(group_ids)
        await self._call(lambda: self._admin.delete_groups(gs), "delete_groups", timeout)

    async def list_offsets(
        self, specs: dict[Any, str | int], timeout: float | None = None
    ) -> dict[TopicPartition, tuple[int, int]]:
        """Each partition's offset for its spec ("earliest", "latest" or a timestamp in ms): (offset,
        timestamp)."""
        s = offset_specs(specs)
        return await self._ask(lambda: self._admin.list_offsets(s), "list_offsets", timeout)

    async def describe_cluster(self, timeout: float | None = None) -> ClusterInfo:
        """The cluster id, controller and brokers."""
        return await self._ask(self._admin.describe_cluster, "describe_cluster", timeout)
