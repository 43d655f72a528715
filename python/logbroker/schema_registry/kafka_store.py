"""The registry's storage: the compacted topic `_schemas` (one partition, replicated like any
topic), read and written through the broker's own listener with logbroker's async client, as
Confluent's registry does with its KafkaStore. Every node tails the partition from its start
into its RegistryState, so every node answers reads; a write is a record produced with
acks=all, visible once the tail has applied it.

    run()              creates the topic if missing (compact, 1 partition, `replication_factor`;
                       refused while fewer brokers are registered, so tried again),
                       then tails it: each record applied to `state`, waiters woken
    catch_up()         waits until the state has applied everything below the partition's HW
                       at the time of the call (a read-your-writes barrier before a write)
    write(key, value)  produces one record, waits until the state has applied it; its offset
"""

from __future__ import annotations

import logging

import trio

from logbroker.aio import Admin, Consumer, NewTopic, Producer
from logbroker.client.errors import KafkaError, TopicAlreadyExistsError
from logbroker.schema_registry.state import RegistryState

log = logging.getLogger("logbroker.schema_registry")

TOPIC = "_schemas"
TIMEOUT_S = 30.0


class StoreError(Exception):
    """The `_schemas` topic could not be read or written in time (why in the message)."""


class KafkaStore:
    def __init__(
        self,
        bootstrap: str,
        state: RegistryState,
        replication_factor: int = 1,
        client_config: dict | None = None,
        publish=None,
    ) -> None:
        """`publish(subject, ids)`: told each subject's live ids as they change (the data
        path's check of schema-validated topics)."""
        self.publish = publish
        self.bootstrap = bootstrap
        self.replication_factor = replication_factor
        self.state = state
        self.client_config = dict(client_config or {})
        self.ready = trio.Event()  # set once the tail has read up to the HW it found at start
        self._moved = trio.Event()  # set (and replaced) whenever the tail applied records
        self._producer: Producer | None = None
        self._admin: Admin | None = None

    async def run(self, *, task_status: trio.TaskStatus = trio.TASK_STATUS_IGNORED) -> None:
        async with (
            Admin(self.bootstrap, client_id="logbroker-schema-registry", **self.client_config) as admin,
            Producer(self.bootstrap, client_id="logbroker-schema-registry", **self.client_config) as producer,
        ):
            self._admin, self._producer = admin, producer
            await self._ensure_topic(admin)
            task_status.started()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._tail)
                await self.catch_up()
                self.ready.set()
                log.info(
                    "schema registry: read %s to offset %d (%d subjects, %d schemas)",
                    TOPIC,
                    self.state.next_offset,
                    len(self.state.subjects),
                    len(self.state.schemas),
                )

    async def _ensure_topic(self, admin: Admin) -> None:
        while True:
            try:
                if TOPIC in await admin.list_topics(timeout=TIMEOUT_S):
                    return
                await admin.create_topics(
                    [NewTopic(TOPIC, 1, self.replication_factor, {"cleanup.policy": "compact"})], timeout=TIMEOUT_S
                )
                log.info(
                    "schema registry: created topic %s (compacted, replication factor %d)",
                    TOPIC,
                    self.replication_factor,
                )
                return
            except TopicAlreadyExistsError:
                return
            except KafkaError as e:  # the cluster is still forming: brokers register, a controller is elected
                log.info("schema registry: topic %s not ready yet (%s); retrying", TOPIC, e)
                await trio.sleep(0.5)

    async def _tail(self) -> None:
        async with Consumer(
            self.bootstrap, client_id="logbroker-schema-registry", enable_auto_commit=False, **self.client_config
        ) as consumer:
            await consumer.assign([(TOPIC, 0)])
            await consumer.seek_to_beginning()
            while True:
                records = await consumer.poll(timeout=0.5)
                for r in records:
                    self.state.apply(r.offset, r.key, r.value)
                if self.publish is not None:
                    for subject, ids in self.state.take_changed().items():
                        self.publish(subject, ids)
                if records:
                    self._moved.set()
                    self._moved = trio.Event()

    async def _wait_applied(self, offset: int, what: str) -> None:
        """Until the state has applied every record below `offset`."""
        with trio.move_on_after(TIMEOUT_S):
            while self.state.next_offset < offset:
                await self._moved.wait()
            return
        raise StoreError(
            f"{what}: {TOPIC} was not read up to offset {offset} within {TIMEOUT_S:.0f} s "
            f"(read up to {self.state.next_offset})"
        )

    async def catch_up(self) -> None:
        assert self._admin is not None
        try:
            ends = await self._admin.list_offsets({(TOPIC, 0): "latest"}, timeout=TIMEOUT_S)
        except KafkaError as e:
            raise StoreError(f"the end offset of {TOPIC}-0 is not known: {e}") from None
        end = next(iter(ends.values()))[0]
        await self._wait_applied(end, "catching up")

    async def write(self, key: bytes, value: bytes | None) -> int:
        assert self._producer is not None
        try:
            meta = await self._producer.send(TOPIC, value, key, partition=0, timeout=TIMEOUT_S)
        except KafkaError as e:
            raise StoreError(f"writing to {TOPIC}-0 failed: {e}") from None
        await self._wait_applied(meta.offset + 1, "reading back a write")
        return meta.offset
