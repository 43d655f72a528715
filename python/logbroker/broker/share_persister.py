"""How a share-partition leader reads and writes its share-partitions' persisted state at
their share coordinators (Kafka's "persister").

The coordinator of (group, topic id, partition) is the leader of its `__share_group_state`
partition (coord/groups/share_coordinator.py), found in the metadata image; the topic is created
on first use. When that leader is this broker the coordinator is called directly, otherwise
over the broker-to-broker channel with Initialize/Read/Write/DeleteShareGroupState (83-86).

Retries: while the coordinator moves or loads (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
COORDINATOR_NOT_AVAILABLE, no leader, the node unreachable) a call is retried with a growing
pause until its deadline; other errors (FENCED_LEADER_EPOCH, FENCED_STATE_EPOCH, ...) are
raised at once. Every failure is a StateTopicError with the Kafka code and a message naming
the group, topic and partition.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

import trio

from logbroker.broker.end_offsets import end_offsets
from logbroker.coord.broker_channel import BrokerChannel, BrokerUnreachable
from logbroker.coord.groups.share_coordinator import Key, ShareCoordinator
from logbroker.coord.groups.share_state_log import SHARE_STATE_TOPIC, ShareState, StateBatch, coordinator_key
from logbroker.coord.groups.state_topic import StateTopicError
from logbroker.coord.metadata.control import ControllerError
from logbroker.coord.peer_security import inter_broker_security
from logbroker.protocol import REQUESTS, ErrorCode

log = logging.getLogger("logbroker.share")

INITIALIZE, READ, WRITE, DELETE, READ_SUMMARY = 83, 84, 85, 86, 87
RETRIABLE = (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE)
CALL_TIMEOUT_S = 30.0


def _what(key: Key) -> str:
    return f"share group {key[0]!r} topic id {key[1]} partition {key[2]}"


class SharePersister:
    def __init__(self, config, controller, coordinator: ShareCoordinator) -> None:
        self.node_id = config.node_id
        self.controller = controller
        self.coordinator = coordinator
        self.channel = BrokerChannel(self.node_id, inter_broker_security(config))

    async def aclose(self) -> None:
        await self.channel.aclose()

    async def _call(self, key: Key, api_key: int, local, request, timeout: float = CALL_TIMEOUT_S):
        """`local()` when this broker is the coordinator, else `request` sent to it; retried
        while the coordinator is not available. The remote answer's one partition result."""
        deadline = trio.current_time() + timeout
        pause = 0.05
        while True:
            try:
                await self.coordinator.ensure_state_topic()
                _index, leader = self.coordinator.coordinator_node(coordinator_key(*key))
                if leader == self.node_id:
                    return await local()
                image = self.controller.image
                endpoint = next(
                    ((b.host, b.port) for b in self.controller.client_brokers(image) if b.node_id == leader), None
                )
                if endpoint is None:
                    raise StateTopicError(
                        ErrorCode.COORDINATOR_NOT_AVAILABLE,
                        f"{_what(key)}: its share coordinator (node {leader}) is not available",
                    )
                resp = await self.channel.request(
                    leader, endpoint, api_key, 0, request, timeout=max(1.0, deadline - trio.current_time())
                )
                result = resp.results[0].partitions[0]
                if result.error_code:
                    raise StateTopicError(
                        result.error_code,
                        result.error_message or f"{_what(key)}: error {result.error_code} from node {leader}",
                    )
                return result
            except (StateTopicError, ControllerError, BrokerUnreachable) as e:
                code = e.code if isinstance(e, StateTopicError) else ErrorCode.COORDINATOR_NOT_AVAILABLE
                if code not in RETRIABLE:
                    raise
                if trio.current_time() + pause > deadline:
                    raise StateTopicError(
                        code, f"{_what(key)}: share coordinator not available within {timeout:.0f} s: {e}"
                    ) from None
                await trio.sleep(pause)
                pause = min(pause * 2, 1.0)

    async def read(self, key: Key, leader_epoch: int) -> tuple[int, int, list[StateBatch]]:
        """(state epoch, start offset (-1: uninitialised), state batches)."""
        Request: Any = REQUESTS[READ]
        request = Request(
            group_id=key[0],
            topics=[
                Request.ReadStateData(
                    topic_id=key[1], partitions=[Request.PartitionData(partition=key[2], leader_epoch=leader_epoch)]
                )
            ],
        )

        async def local():
            return await self.coordinator.read(key, leader_epoch)

        got = await self._call(key, READ, local, request)
        if got is None:
            return 0, -1, []
        if isinstance(got, ShareState):
            return got.state_epoch, got.start_offset, list(got.batches)
        return (
            got.state_epoch,
            got.start_offset,
            [StateBatch.from_wire(b) for b in got.state_batches],
        )

    async def write(
        self, key: Key, state_epoch: int, leader_epoch: int, start_offset: int, batches: list[StateBatch]
    ) -> None:
        Request: Any = REQUESTS[WRITE]
        request = Request(
            group_id=key[0],
            topics=[
                Request.WriteStateData(
                    topic_id=key[1],
                    partitions=[
                        Request.PartitionData(
                            partition=key[2],
                            state_epoch=state_epoch,
                            leader_epoch=leader_epoch,
                            start_offset=start_offset,
                            state_batches=[
                                Request.StateBatch(
                                    first_offset=b.first_offset,
                                    last_offset=b.last_offset,
                                    delivery_state=b.delivery_state,
                                    delivery_count=b.delivery_count,
                                    unknown_tagged_fields=b.tagged(),
                                )
                                for b in batches
                            ],
                        )
                    ],
                )
            ],
        )

        async def local():
            await self.coordinator.write(key, state_epoch, leader_epoch, start_offset, batches)

        await self._call(key, WRITE, local, request)

    async def initialize(self, key: Key, state_epoch: int, start_offset: int) -> None:
        Request: Any = REQUESTS[INITIALIZE]
        request = Request(
            group_id=key[0],
            topics=[
                Request.InitializeStateData(
                    topic_id=key[1],
                    partitions=[
                        Request.PartitionData(partition=key[2], state_epoch=state_epoch, start_offset=start_offset)
                    ],
                )
            ],
        )

        async def local():
            await self.coordinator.initialize(key, state_epoch, start_offset)

        await self._call(key, INITIALIZE, local, request)

    async def delete(self, key: Key) -> None:
        Request: Any = REQUESTS[DELETE]
        request = Request(
            group_id=key[0],
            topics=[Request.DeleteStateData(topic_id=key[1], partitions=[Request.PartitionData(partition=key[2])])],
        )

        async def local():
            await self.coordinator.delete(key)

        await self._call(key, DELETE, local, request)

    async def summaries(
        self, group_id: str, parts: list[tuple[uuid.UUID, int]]
    ) -> dict[tuple[uuid.UUID, int], tuple[int, str | None, int, int, int, int]]:
        """For each (topic id, partition) of the group: (error code, message, state epoch,
        leader epoch, start offset, delivery-complete count); start offset -1 where the group
        has no state, count -1 where unknown. One ReadShareGroupStateSummary (v1, KIP-1226)
        per coordinator node, not retried (an admin asks again)."""
        out: dict[tuple[uuid.UUID, int], tuple[int, str | None, int, int, int, int]] = {}
        if SHARE_STATE_TOPIC not in self.controller.image.topics:  # no group has state yet
            return {tp: (ErrorCode.NONE, None, 0, -1, -1, -1) for tp in parts}
        by_node: dict[int, list[tuple[uuid.UUID, int]]] = {}
        for tp in parts:
            by_node.setdefault(self.coordinator.coordinator_node(coordinator_key(group_id, *tp))[1], []).append(tp)
        endpoints = {b.node_id: (b.host, b.port) for b in self.controller.client_brokers(self.controller.image)}

        async def ask(node: int, tps: list[tuple[uuid.UUID, int]]) -> None:
            if node == self.node_id:
                for tp in tps:
                    try:
                        s = await self.coordinator.read_summary((group_id, *tp), -1)
                    except StateTopicError as e:
                        out[tp] = (e.code, str(e), 0, -1, -1, -1)
                        continue
                    out[tp] = (
                        (ErrorCode.NONE, None, 0, -1, -1, -1)
                        if s is None
                        else (
                            ErrorCode.NONE,
                            None,
                            s.state_epoch,
                            s.leader_epoch,
                            s.start_offset,
                            s.delivery_complete_count,
                        )
                    )
                return
            Request: Any = REQUESTS[READ_SUMMARY]
            topics: dict[uuid.UUID, list[int]] = {}
            for tid, p in tps:
                topics.setdefault(tid, []).append(p)
            request = Request(
                group_id=group_id,
                topics=[
                    Request.ReadStateSummaryData(
                        topic_id=tid, partitions=[Request.PartitionData(partition=p, leader_epoch=-1) for p in ps]
                    )
                    for tid, ps in topics.items()
                ],
            )
            try:
                if node not in endpoints:
                    raise BrokerUnreachable(f"share coordinator node {node} is not available")
                resp = await self.channel.request(
                    node, endpoints[node], READ_SUMMARY, 1, request, timeout=CALL_TIMEOUT_S
                )
            except BrokerUnreachable as e:
                for tp in tps:
                    out[tp] = (ErrorCode.COORDINATOR_NOT_AVAILABLE, str(e), 0, -1, -1, -1)
                return
            for r in resp.results:
                for pr in r.partitions:
                    out[(r.topic_id, pr.partition)] = (
                        pr.error_code,
                        pr.error_message,
                        pr.state_epoch,
                        pr.leader_epoch,
                        pr.start_offset,
                        pr.delivery_complete_count,
                    )

        async with trio.open_nursery() as nursery:
            for node, tps in by_node.items():
                nursery.start_soon(ask, node, tps)
        for tp in parts:
            out.setdefault(
                tp, (ErrorCode.COORDINATOR_NOT_AVAILABLE, "no answer from the share coordinator", 0, -1, -1, -1)
            )
        return out

    async def end_offsets(self, replicas, parts: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """The high watermark of each partition (-1 when its leader cannot be asked), for the
        share-partition lag of KIP-1226 (broker/end_offsets.py)."""
        return await end_offsets(self.channel, self.controller, replicas, self.node_id, parts)
