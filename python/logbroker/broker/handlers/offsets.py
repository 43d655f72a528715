"""OffsetCommit (8) and OffsetFetch (9): committed offsets of consumer groups.

OffsetFetch with require_stable (v7+, sent by read_committed consumers) answers
UNSTABLE_OFFSET_COMMIT for a partition whose offset a still-open transaction commits
(TxnOffsetCommit), so the consumer retries rather than start from an offset about to move."""

from __future__ import annotations

from logbroker.protocol import RESPONSES, ErrorCode


async def offset_commit(ctx, request):
    Response = RESPONSES[8]
    version = ctx.version
    offsets = []
    for t in request.topics:
        for p in t.partitions:
            offsets.append((t.name, p.partition_index, p.committed_offset,
                            p.committed_leader_epoch if version >= 6 else -1, p.committed_metadata))
    results = await ctx.broker.groups.commit_offsets(
        group_id=request.group_id,
        generation_id=request.generation_id_or_member_epoch,
        member_id=request.member_id,
        group_instance_id=request.group_instance_id if version >= 7 else None,
        offsets=offsets,
    )
    return Response(throttle_time_ms=0, topics=[
        Response.OffsetCommitResponseTopic(name=t.name, partitions=[
            Response.OffsetCommitResponsePartition(partition_index=p.partition_index,
                                                   error_code=results[(t.name, p.partition_index)])
            for p in t.partitions
        ])
        for t in request.topics
    ])


def _fetch_one(ctx, group_id: str, topics, require_stable: bool = False
               ) -> tuple[int, list[tuple[str, list[tuple[int, object, int]]]]]:
    """(group error, [(topic, [(partition, offset or None, partition error)])])."""
    groups = ctx.broker.groups
    wanted = None if topics is None else [(t.name, p) for t in topics for p in t.partition_indexes]
    code, found = groups.fetch_offsets(group_id, wanted)
    by_topic: dict[str, list] = {}

    def unstable(t: str, p: int) -> int:
        return ErrorCode.UNSTABLE_OFFSET_COMMIT if require_stable and not code and \
            groups.has_pending_txn_offsets(group_id, [(t, p)]) else ErrorCode.NONE

    if wanted is None:
        for (t, p), v in sorted(found.items()):
            by_topic.setdefault(t, []).append((p, v, unstable(t, p)))
    else:
        for t, p in wanted:
            by_topic.setdefault(t, []).append((p, found.get((t, p)), unstable(t, p)))
    return code, list(by_topic.items())


async def offset_fetch(ctx, request):
    Response = RESPONSES[9]
    version = ctx.version
    if version >= 8:
        groups = []
        for g in request.groups:
            code, topics = _fetch_one(ctx, g.group_id, g.topics, request.require_stable)
            groups.append(Response.OffsetFetchResponseGroup(group_id=g.group_id, error_code=code, topics=[
                Response.OffsetFetchResponseTopics(name=t, partitions=[
                    Response.OffsetFetchResponsePartitions(
                        partition_index=p,
                        committed_offset=v.offset if v else -1,
                        committed_leader_epoch=v.leader_epoch if v else -1,
                        metadata=v.metadata if v else "",
                        error_code=pcode,
                    ) for p, v, pcode in parts
                ]) for t, parts in topics
            ]))
        return Response(throttle_time_ms=0, groups=groups)
    code, topics = _fetch_one(ctx, request.group_id, request.topics, version >= 7 and request.require_stable)
    partition_code = code if version < 2 else ErrorCode.NONE
    return Response(
        throttle_time_ms=0,
        error_code=code if version >= 2 else 0,
        topics=[
            Response.OffsetFetchResponseTopic(name=t, partitions=[
                Response.OffsetFetchResponsePartition(
                    partition_index=p,
                    committed_offset=v.offset if v else -1,
                    committed_leader_epoch=(v.leader_epoch if v else -1) if version >= 5 else -1,
                    metadata=v.metadata if v else "",
                    error_code=partition_code or pcode,
                ) for p, v, pcode in parts
            ]) for t, parts in topics
        ],
    )


ENTRIES = [
    (8, 2, 9, offset_commit),
    (9, 1, 9, offset_fetch),
]
