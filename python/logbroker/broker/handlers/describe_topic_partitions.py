"""DescribeTopicPartitions (75, KIP-966): the topics' partitions with leader, leader epoch,
replicas, ISR, eligible leader replicas and offline replicas, a page at a time; what
`kafka-topics --describe` asks first (Kafka 3.8+ tools).

As Kafka's DescribeTopicPartitionsRequestHandler and KRaftMetadataCache:

- no topics named: every topic the principal may DESCRIBE (the others are left out);
  topics named: each of them, those it may not describe answered TOPIC_AUTHORIZATION_FAILED
  (with a zero topic id, after the others) before anything says whether they exist, an
  unknown one UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an illegal name).
- the topics in name order, from the cursor's topic on (names before it are skipped); the
  cursor's topic starts at its partition, the others at 0.
- at most max(min(2000, ResponsePartitionLimit), 1) partitions (2000 is Kafka's
  max.request.partition.size.limit default). When a topic's partitions do not all fit, the
  response ends with that topic's partitions so far and NextCursor names it and the first
  partition left out; when the limit is reached at a topic's end and a topic follows,
  NextCursor names that topic at partition 0. No NextCursor: nothing is left.
- a cursor whose topic is not among the topics named, or whose partition is negative, is
  INVALID_REQUEST for every topic named (Kafka's error response for the request).
- the eligible leader replicas and the last known ELR as the metadata image holds them
  (coord/metadata/eligible_leaders.py; empty while eligible.leader.replicas.version is 0).
  A replica is offline when its broker is not registered or is fenced; the leader is -1
  when its broker is not registered.
- TopicAuthorizedOperations for every topic answered but the unauthorized ones.
"""

from __future__ import annotations

import uuid

from logbroker.common.acl import AclOperation as Op
from logbroker.common.acl import ResourceType as Res
from logbroker.coord.metadata.metadata import topic_name_error
from logbroker.protocol import RESPONSES, ErrorCode

API_KEY = 75
MIN_VERSION = 0
MAX_VERSION = 0

Response = RESPONSES[API_KEY]
ZERO_UUID = uuid.UUID(int=0)
MAX_REQUEST_PARTITION_SIZE_LIMIT = 2000  # Kafka's max.request.partition.size.limit default
NO_LEADER_ID = -1


def _is_internal(name: str) -> bool:
    return name.startswith("__")  # as Metadata (handlers/metadata.py)


def _invalid(request, message: str):
    return Response(
        throttle_time_ms=0,
        next_cursor=None,
        topics=[
            Response.DescribeTopicPartitionsResponseTopic(
                error_code=ErrorCode.INVALID_REQUEST, name=t.name, topic_id=ZERO_UUID, is_internal=False, partitions=[]
            )
            for t in request.topics
        ],
    )


def _partitions(image, topic, start: int, limit: int) -> tuple[list, int]:
    """The partitions of `topic` from `start`, at most `limit`, and the index of the first
    left out (-1: none)."""
    count = len(topic.partitions)
    upper = min(count, start + limit)
    out = []
    for i in range(start, upper):
        p = topic.partitions.get(i)
        if p is None:
            continue
        offline = [r for r in p.replicas if r not in image.brokers or image.brokers[r].fenced]
        out.append(
            Response.DescribeTopicPartitionsResponsePartition(
                error_code=ErrorCode.NONE,
                partition_index=i,
                leader_id=p.leader if p.leader in image.brokers else NO_LEADER_ID,
                leader_epoch=p.leader_epoch,
                replica_nodes=list(p.replicas),
                isr_nodes=list(p.isr),
                eligible_leader_replicas=list(p.elr),
                last_known_elr=list(p.last_known_elr),
                offline_replicas=offline,
            )
        )
    return out, (upper if upper < count else -1)


async def handle(ctx, request):
    image = ctx.controller.image
    everything = not request.topics
    cursor = request.cursor
    cursor_topic = cursor.topic_name if cursor is not None else ""
    if everything:
        names = {n for n in image.topics if n >= cursor_topic}
    else:
        names = {t.name for t in request.topics if t.name >= cursor_topic}
        if cursor is not None and cursor.topic_name not in names:
            return _invalid(request, "the topic list should contain the cursor topic")
    if cursor is not None and cursor.partition_index < 0:
        return _invalid(request, "the cursor partition must be valid")

    unauthorized = []
    authorized = []
    for name in sorted(names):
        if ctx.authorize(Op.DESCRIBE, Res.TOPIC, name):
            authorized.append(name)
        elif not everything:
            unauthorized.append(
                Response.DescribeTopicPartitionsResponseTopic(
                    error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                    name=name,
                    topic_id=ZERO_UUID,
                    is_internal=False,
                    partitions=[],
                )
            )

    remaining = max(min(MAX_REQUEST_PARTITION_SIZE_LIMIT, request.response_partition_limit), 1)
    topics = []
    next_cursor = None
    for name in authorized:
        if remaining <= 0:
            # the limit was reached at the previous topic's end: resume at this one
            next_cursor = Response.Cursor(topic_name=name, partition_index=0)
            break
        topic = image.topics.get(name)
        if topic is None:
            if not everything:
                code = (
                    ErrorCode.INVALID_TOPIC_EXCEPTION
                    if topic_name_error(name)
                    else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                )
                topics.append(
                    Response.DescribeTopicPartitionsResponseTopic(
                        error_code=code, name=name, topic_id=ZERO_UUID, is_internal=_is_internal(name), partitions=[]
                    )
                )
            continue
        start = cursor.partition_index if cursor is not None and name == cursor_topic else 0
        parts, next_index = _partitions(image, topic, start, remaining)
        topics.append(
            Response.DescribeTopicPartitionsResponseTopic(
                error_code=ErrorCode.NONE,
                name=name,
                topic_id=topic.topic_id,
                is_internal=_is_internal(name),
                partitions=parts,
            )
        )
        if next_index != -1:
            next_cursor = Response.Cursor(topic_name=name, partition_index=next_index)
            break
        remaining -= len(parts)
    for t in topics:
        t.topic_authorized_operations = ctx.authorized_operations(Res.TOPIC, t.name)
    return Response(throttle_time_ms=0, topics=topics + unauthorized, next_cursor=next_cursor)
