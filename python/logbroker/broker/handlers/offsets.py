"""OffsetCommit (8), OffsetFetch (9) and OffsetDelete (47): committed offsets of consumer
groups.

OffsetFetch with require_stable (v7+, sent by read_committed consumers) answers
UNSTABLE_OFFSET_COMMIT for a partition whose offset a still-open transaction commits
(TxnOffsetCommit), so the consumer retries rather than start from an offset about to move.

Authorization as Kafka's: OffsetCommit READ on the group (else GROUP_AUTHORIZATION_FAILED on
every partition), then READ on each topic (TOPIC_AUTHORIZATION_FAILED on its partitions, the
others committed); OffsetFetch in `_fetch_one`; OffsetDelete DELETE on the group (else
GROUP_AUTHORIZATION_FAILED and nothing else), then READ on each topic
(TOPIC_AUTHORIZATION_FAILED on its partitions), then UNKNOWN_TOPIC_OR_PARTITION for a topic or
partition that does not exist; what remains goes to the coordinator, whose group error
(GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, NOT_COORDINATOR, ...) replaces every partition's, as
Kafka's OffsetDeleteResponse.Builder.merge does."""

from __future__ import annotations

import uuid

from logbroker.broker.handlers.lookup import name_topics_by_id
from logbroker.common.acl import AclOperation as Op
from logbroker.common.acl import ResourceType as Res
from logbroker.protocol import RESPONSES, ErrorCode

# OffsetCommit v10 and OffsetFetch v10 name topics by id (KIP-848): `name_topics_by_id` fills in
# each name from the metadata image; an id it does not know is UNKNOWN_TOPIC_ID on each of the
# topic's partitions, as Kafka answers.
TOPIC_IDS_FROM = 10
ZERO_UUID = uuid.UUID(int=0)


def _each_partition(Response, topics, code: int):
    """An OffsetCommit response giving every partition of `topics` the error `code`."""
    return Response(
        throttle_time_ms=0,
        topics=[
            Response.OffsetCommitResponseTopic(
                name=t.name,
                topic_id=t.topic_id,
                partitions=[
                    Response.OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=code)
                    for p in t.partitions
                ],
            )
            for t in topics
        ],
    )


async def offset_commit(ctx, request):
    Response = RESPONSES[8]
    version = ctx.version
    unknown = name_topics_by_id(ctx, request.topics) if version >= TOPIC_IDS_FROM else set()
    if not ctx.authorize(Op.READ, Res.GROUP, request.group_id):
        return _each_partition(Response, request.topics, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    readable = ctx.authorized(Op.READ, Res.TOPIC, [t.name for t in request.topics if t.topic_id not in unknown])

    def code_of(t, p) -> int:
        if t.topic_id in unknown:
            return ErrorCode.UNKNOWN_TOPIC_ID
        if t.name not in readable:
            return ErrorCode.TOPIC_AUTHORIZATION_FAILED
        return results[(t.name, p.partition_index)]

    offsets = []
    for t in request.topics:
        if t.topic_id in unknown or t.name not in readable:  # answered with an error, not committed
            continue
        for p in t.partitions:
            offsets.append(
                (
                    t.name,
                    p.partition_index,
                    p.committed_offset,
                    p.committed_leader_epoch if version >= 6 else -1,
                    p.committed_metadata,
                )
            )
    results = (
        {}
        if not offsets
        else await ctx.broker.groups.commit_offsets(
            group_id=request.group_id,
            generation_id=request.generation_id_or_member_epoch,
            member_id=request.member_id,
            group_instance_id=request.group_instance_id if version >= 7 else None,
            offsets=offsets,
        )
    )
    return Response(
        throttle_time_ms=0,
        topics=[
            Response.OffsetCommitResponseTopic(
                name=t.name,
                topic_id=t.topic_id,
                partitions=[
                    Response.OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=code_of(t, p))
                    for p in t.partitions
                ],
            )
            for t in request.topics
        ],
    )


def _fetch_one(
    ctx, group_id: str, topics, require_stable: bool = False
) -> tuple[int, list[tuple[str, list[tuple[int, object, int]]]]]:
    """(group error, [(topic, [(partition, offset or None, partition error)])]).

    Authorization as Kafka's: DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED and
    nothing else); of all the group's offsets only those of topics the principal may describe,
    a named topic it may not describe TOPIC_AUTHORIZATION_FAILED."""
    if not ctx.authorize(Op.DESCRIBE, Res.GROUP, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, []
    groups = ctx.broker.groups
    described = ctx.authorized(Op.DESCRIBE, Res.TOPIC, [t.name for t in topics or []])
    wanted = (
        None if topics is None else [(t.name, p) for t in topics if t.name in described for p in t.partition_indexes]
    )
    code, found = groups.fetch_offsets(group_id, wanted)
    by_topic: dict[str, list] = {}

    def unstable(t: str, p: int) -> int:
        return (
            ErrorCode.UNSTABLE_OFFSET_COMMIT
            if require_stable and not code and groups.has_pending_txn_offsets(group_id, [(t, p)])
            else ErrorCode.NONE
        )

    if wanted is None:
        shown = ctx.authorized(Op.DESCRIBE, Res.TOPIC, {t for t, _ in found})
        for (t, p), v in sorted(found.items()):
            if t in shown:
                by_topic.setdefault(t, []).append((p, v, unstable(t, p)))
    else:
        for t in topics:
            for p in t.partition_indexes:
                by_topic.setdefault(t.name, []).append(
                    (p, found.get((t.name, p)), unstable(t.name, p))
                    if t.name in described
                    else (p, None, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                )
    return code, list(by_topic.items())


async def offset_fetch(ctx, request):
    Response = RESPONSES[9]
    version = ctx.version
    if version >= 8:
        groups = []
        for g in request.groups:
            unknown = name_topics_by_id(ctx, g.topics) if version >= TOPIC_IDS_FROM else set()
            asked = None if g.topics is None else [t for t in g.topics if t.topic_id not in unknown]
            code, found = _fetch_one(ctx, g.group_id, asked, request.require_stable)
            image = ctx.controller.image
            topics = [
                (t, image.topics[t].topic_id if t in image.topics else None, parts)
                for t, parts in found
                # by id, a topic deleted since its offsets were committed has no id to be named by
                if version < TOPIC_IDS_FROM or t in image.topics
            ]
            if not code:
                topics += [
                    ("", t.topic_id, [(p, None, ErrorCode.UNKNOWN_TOPIC_ID) for p in t.partition_indexes])
                    for t in g.topics or ()
                    if t.topic_id in unknown
                ]
            groups.append(
                Response.OffsetFetchResponseGroup(
                    group_id=g.group_id,
                    error_code=code,
                    topics=[
                        Response.OffsetFetchResponseTopics(
                            name=t,
                            topic_id=topic_id or ZERO_UUID,
                            partitions=[
                                Response.OffsetFetchResponsePartitions(
                                    partition_index=p,
                                    committed_offset=v.offset if v else -1,
                                    committed_leader_epoch=v.leader_epoch if v else -1,
                                    metadata=v.metadata if v else "",
                                    error_code=pcode,
                                )
                                for p, v, pcode in parts
                            ],
                        )
                        for t, topic_id, parts in topics
                    ],
                )
            )
        return Response(throttle_time_ms=0, groups=groups)
    code, topics = _fetch_one(ctx, request.group_id, request.topics, version >= 7 and request.require_stable)
    if code == ErrorCode.GROUP_AUTHORIZATION_FAILED and version < 2:  # v1 has no group error: on each partition
        topics = [(t.name, [(p, None, code) for p in t.partition_indexes]) for t in request.topics or []]
    partition_code = code if version < 2 else ErrorCode.NONE
    return Response(
        throttle_time_ms=0,
        error_code=code if version >= 2 else 0,
        topics=[
            Response.OffsetFetchResponseTopic(
                name=t,
                partitions=[
                    Response.OffsetFetchResponsePartition(
                        partition_index=p,
                        committed_offset=v.offset if v else -1,
                        committed_leader_epoch=(v.leader_epoch if v else -1) if version >= 5 else -1,
                        metadata=v.metadata if v else "",
                        error_code=partition_code or pcode,
                    )
                    for p, v, pcode in parts
                ],
            )
            for t, parts in topics
        ],
    )


async def offset_delete(ctx, request):
    Response = RESPONSES[47]
    if not ctx.authorize(Op.DELETE, Res.GROUP, request.group_id):
        return Response(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, topics=[])
    readable = ctx.authorized(Op.READ, Res.TOPIC, [t.name for t in request.topics])
    image = ctx.controller.image
    codes: dict[tuple[str, int], int] = {}
    wanted: list[tuple[str, int]] = []
    for t in request.topics:
        known = image.topics.get(t.name)
        for p in t.partitions:
            key = (t.name, p.partition_index)
            if t.name not in readable:
                codes[key] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif known is None or p.partition_index not in known.partitions:
                codes[key] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                wanted.append(key)
    code, results = await ctx.broker.groups.delete_offsets(request.group_id, wanted)
    if code:
        return Response(throttle_time_ms=0, error_code=code, topics=[])
    codes.update(results)
    return Response(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        topics=[
            Response.OffsetDeleteResponseTopic(
                name=t.name,
                partitions=[
                    Response.OffsetDeleteResponsePartition(
                        partition_index=p.partition_index, error_code=codes[(t.name, p.partition_index)]
                    )
                    for p in t.partitions
                ],
            )
            for t in request.topics
        ],
    )


ENTRIES = [
    (8, 2, 10, offset_commit),
    (9, 1, 10, offset_fetch),
    (47, 0, 0, offset_delete),
]
