"""DescribeProducers (61): the idempotent producers a partition's log is tracking, with the
coordinator epoch of their last transaction marker and the first offset of their open
transaction (what `kafka-transactions.sh describe-producers` and `find-hanging` read).
Needs READ on the topic (else TOPIC_AUTHORIZATION_FAILED), as Kafka."""

from __future__ import annotations

from logbroker.broker.handlers.lookup import leader_partition
from logbroker.common.acl import AclOperation as Op
from logbroker.common.acl import ResourceType as Res
from logbroker.protocol import RESPONSES, ErrorCode

API_KEY = 61
MIN_VERSION = 0
MAX_VERSION = 0

Response = RESPONSES[API_KEY]


async def handle(ctx, request):
    topics = []
    for t in request.topics:
        parts = []
        topics.append(Response.TopicResponse(name=t.name, partitions=parts))
        readable = ctx.authorize(Op.READ, Res.TOPIC, t.name)
        for idx in t.partition_indexes:
            code, part = (
                (ErrorCode.TOPIC_AUTHORIZATION_FAILED, None) if not readable else leader_partition(ctx, t.name, idx)
            )
            r = Response.PartitionResponse(
                partition_index=idx, error_code=code, error_message=None, active_producers=[]
            )
            parts.append(r)
            if part is not None:
                r.active_producers = [
                    Response.ProducerState(
                        producer_id=pid,
                        producer_epoch=epoch,
                        last_sequence=seq,
                        last_timestamp=ts,
                        coordinator_epoch=coord_epoch,
                        current_txn_start_offset=txn_start,
                    )
                    for pid, epoch, seq, ts, _first, coord_epoch, txn_start in part.log.active_producers()
                ]
    return Response(throttle_time_ms=0, topics=topics)
