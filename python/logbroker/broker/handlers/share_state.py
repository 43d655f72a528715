"""The share coordinator's APIs, sent by share-partition leaders (broker to broker, KIP-932):
InitializeShareGroupState (83), ReadShareGroupState (84), WriteShareGroupState (85),
DeleteShareGroupState (86), ReadShareGroupStateSummary (87). The logic lives in
coord/groups/share_coordinator.py; errors are per partition, with a message naming the
share-partition."""

from __future__ import annotations

from logbroker.common.acl import CLUSTER_NAME
from logbroker.common.acl import AclOperation as Op
from logbroker.common.acl import ResourceType as Res
from logbroker.coord.groups.share_state_log import StateBatch
from logbroker.coord.groups.state_topic import StateTopicError
from logbroker.protocol import RESPONSES, ErrorCode


async def _each(ctx, request, Response, Result, call):
    """Runs `call(key, partition request) -> fields` for every partition of the request; the
    response with one result per partition (error code and message on failure). The caller,
    a share-partition leader, needs CLUSTER_ACTION on the cluster (else every partition
    CLUSTER_AUTHORIZATION_FAILED), as Kafka."""
    allowed = ctx.authorize(Op.CLUSTER_ACTION, Res.CLUSTER, CLUSTER_NAME)
    results = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            if not allowed:
                parts.append(
                    Response.PartitionResult(
                        partition=p.partition,
                        error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                        error_message="Cluster authorization failed.",
                    )
                )
                continue
            try:
                fields = await call((request.group_id, t.topic_id, p.partition), p)
                error = {}
            except StateTopicError as e:
                fields, error = {}, {"error_code": e.code, "error_message": str(e)}
            parts.append(Response.PartitionResult(partition=p.partition, **fields, **error))
        results.append(Result(topic_id=t.topic_id, partitions=parts))
    return Response(results=results)


def _batches(Response, state) -> list:
    return [
        Response.StateBatch(
            first_offset=b.first_offset,
            last_offset=b.last_offset,
            delivery_state=b.delivery_state,
            delivery_count=b.delivery_count,
            unknown_tagged_fields=b.tagged(),
        )
        for b in state.batches
    ]


async def initialize_share_group_state(ctx, request):
    Response = RESPONSES[83]

    async def call(key, p):
        await ctx.broker.share_coordinator.initialize(key, p.state_epoch, p.start_offset)
        return {}

    return await _each(ctx, request, Response, Response.InitializeStateResult, call)


async def read_share_group_state(ctx, request):
    Response = RESPONSES[84]

    async def call(key, p):
        s = await ctx.broker.share_coordinator.read(key, p.leader_epoch)
        if s is None:
            return {"state_epoch": 0, "start_offset": -1, "state_batches": []}
        return {"state_epoch": s.state_epoch, "start_offset": s.start_offset, "state_batches": _batches(Response, s)}

    return await _each(ctx, request, Response, Response.ReadStateResult, call)


async def write_share_group_state(ctx, request):
    Response = RESPONSES[85]

    async def call(key, p):
        batches = [StateBatch.from_wire(b) for b in p.state_batches]
        await ctx.broker.share_coordinator.write(key, p.state_epoch, p.leader_epoch, p.start_offset, batches)
        return {}

    return await _each(ctx, request, Response, Response.WriteStateResult, call)


async def delete_share_group_state(ctx, request):
    Response = RESPONSES[86]

    async def call(key, p):
        await ctx.broker.share_coordinator.delete(key)
        return {}

    return await _each(ctx, request, Response, Response.DeleteStateResult, call)


async def read_share_group_state_summary(ctx, request):
    Response = RESPONSES[87]

    async def call(key, p):
        s = await ctx.broker.share_coordinator.read_summary(key, p.leader_epoch)
        if s is None:
            return {"state_epoch": 0, "leader_epoch": -1, "start_offset": -1}
        fields = {"state_epoch": s.state_epoch, "leader_epoch": s.leader_epoch, "start_offset": s.start_offset}
        if ctx.version >= 1:
            fields["delivery_complete_count"] = s.delivery_complete_count
        return fields

    return await _each(ctx, request, Response, Response.ReadStateSummaryResult, call)


ENTRIES = [
    (83, 0, 0, initialize_share_group_state),
    (84, 0, 0, read_share_group_state),
    (85, 0, 1, write_share_group_state),
    (86, 0, 0, delete_share_group_state),
    (87, 0, 1, read_share_group_state_summary),
]
