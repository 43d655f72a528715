"""The partition lookup every partition-level request handler makes (ListOffsets,
OffsetForLeaderEpoch, DeleteRecords, ...): the local leader replica, or the Kafka error
that says why this broker cannot serve it."""

from __future__ import annotations

from logbroker.protocol import ErrorCode


def leader_partition(ctx, topic: str, index: int, current_leader_epoch: int = -1):
    """The one lookup every partition-level request makes: (error code, Partition or None).

    UNKNOWN_TOPIC_OR_PARTITION when the partition does not exist, NOT_LEADER_OR_FOLLOWER
    when this broker does not lead it (holding a replica or not), and for a client-supplied
    current leader epoch (-1 = not checked) FENCED_LEADER_EPOCH if it is older than ours,
    UNKNOWN_LEADER_EPOCH if newer.
    """
    part = ctx.replicas.get(topic, index)
    if part is None:
        t = ctx.controller.image.topics.get(topic)
        if t is not None and index in t.partitions:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, None
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
    if not part.is_leader:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER, None
    if current_leader_epoch >= 0 and current_leader_epoch != part.leader_epoch:
        if current_leader_epoch < part.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH, None
        return ErrorCode.UNKNOWN_LEADER_EPOCH, None
    return ErrorCode.NONE, part


def name_topics_by_id(ctx, topics) -> set:
    """For the versions that name topics by id (OffsetCommit v10, OffsetFetch v10,
    TxnOffsetCommit v6): sets each request topic's `name` from the metadata image, and returns
    the ids the image does not know, whose partitions are answered UNKNOWN_TOPIC_ID (their
    `name` is set to "", a name no topic has)."""
    image = ctx.controller.image
    unknown = set()
    for t in topics or ():
        found = image.topic_by_id(t.topic_id)
        if found is None:
            unknown.add(t.topic_id)
            t.name = ""
        else:
            t.name = found.name
    return unknown
