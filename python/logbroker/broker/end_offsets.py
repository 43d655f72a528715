"""The high watermarks of partitions anywhere in the cluster, for lag figures (share groups,
KIP-1226; consumer groups in the metrics endpoint): read from the local log where this broker
leads the partition, else with one ListOffsets (latest, read_uncommitted) per leader over
the broker-to-broker channel. A partition whose leader cannot be asked gets -1.
"""

from __future__ import annotations

from typing import Any

import trio

from logbroker.coord.broker_channel import BrokerChannel, BrokerUnreachable
from logbroker.protocol import REQUESTS, ErrorCode

LIST_OFFSETS = 2
LIST_OFFSETS_VERSION = 7
CALL_TIMEOUT_S = 10.0


async def end_offsets(
    channel: BrokerChannel, controller, replicas, node_id: int, parts: list[tuple[str, int]]
) -> dict[tuple[str, int], int]:
    image = controller.image
    endpoints = {b.node_id: (b.host, b.port) for b in controller.client_brokers(image)}
    out: dict[tuple[str, int], int] = {}
    by_leader: dict[int, list[tuple[str, int]]] = {}
    for t, p in parts:
        ps = image.topics[t].partitions.get(p) if t in image.topics else None
        leader = -1 if ps is None else ps.leader
        local = replicas.get(t, p) if leader == node_id else None
        if local is not None:
            out[(t, p)] = local.log.high_watermark
        else:
            by_leader.setdefault(leader, []).append((t, p))

    async def ask(leader: int, tps: list[tuple[str, int]]) -> None:
        if leader not in endpoints:
            return
        Request: Any = REQUESTS[LIST_OFFSETS]
        topics: dict[str, list[int]] = {}
        for t, p in tps:
            topics.setdefault(t, []).append(p)
        request = Request(
            replica_id=-1,
            isolation_level=0,
            topics=[
                Request.ListOffsetsTopic(
                    name=t,
                    partitions=[
                        Request.ListOffsetsPartition(partition_index=p, current_leader_epoch=-1, timestamp=-1)
                        for p in ps
                    ],
                )
                for t, ps in topics.items()
            ],
        )
        try:
            resp = await channel.request(
                leader, endpoints[leader], LIST_OFFSETS, LIST_OFFSETS_VERSION, request, timeout=CALL_TIMEOUT_S
            )
        except BrokerUnreachable:
            return
        for t in resp.topics:
            for pr in t.partitions:
                if pr.error_code == ErrorCode.NONE:
                    out[(t.name, pr.partition_index)] = pr.offset

    async with trio.open_nursery() as nursery:
        for leader, tps in by_leader.items():
            nursery.start_soon(ask, leader, tps)
    return {tp: out.get(tp, -1) for tp in parts}
