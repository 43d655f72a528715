"""AlterPartition (56), on the controller listener only: a partition leader asks the active
controller to change the ISR of partitions it leads, many in one request
(coord/metadata/controller.py `alter_partitions`, replication_control.py has the checks):
each partition is answered on its own, and the accepted ones are committed together, one
metadata-log entry per request. Versions 2-3 name topics by id; v3 sends each ISR member
with its broker epoch (accepted, the ids are used). A node that is not the active controller
answers NOT_CONTROLLER."""

from __future__ import annotations

import itertools
import logging

from logbroker.common.acl import CLUSTER_NAME
from logbroker.common.acl import AclOperation as Op
from logbroker.common.acl import ResourceType as Res
from logbroker.coord.metadata.control import ControllerError, IsrChange
from logbroker.log_format import fields
from logbroker.protocol import RESPONSES, ErrorCode

API_KEY = 56
MIN_VERSION = 2
MAX_VERSION = 3

Response = RESPONSES[API_KEY]
log = logging.getLogger("logbroker.controller")


async def handle(ctx, request):
    if not ctx.authorize(Op.CLUSTER_ACTION, Res.CLUSTER, CLUSTER_NAME):  # Kafka's rule (partition leaders only)
        return Response(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, topics=[])
    controller = ctx.controller
    if not controller.quorum.is_active:
        return Response(throttle_time_ms=0, error_code=ErrorCode.NOT_CONTROLLER, topics=[])
    changes = [
        IsrChange(
            t.topic_id,
            p.partition_index,
            p.leader_epoch,
            p.partition_epoch,
            [b.broker_id for b in p.new_isr_with_epochs] if ctx.version >= 3 else list(p.new_isr),
        )
        for t in request.topics
        for p in t.partitions
    ]
    failed = None
    try:
        results = await controller.alter_partitions(request.broker_id, request.broker_epoch, changes)
    except ControllerError as e:  # nothing committed (no longer the active controller, the entry timed out)
        failed = e
        results = [(e.code, e.message, None)] * len(changes)
        log.info(
            "AlterPartition from broker %d for %d partition(s) failed: %s: %s",
            request.broker_id,
            len(changes),
            ErrorCode(e.code).name,
            e.message,
            extra=fields(peer=request.broker_id),
        )
    answers = iter(zip(changes, results))
    topics = []
    for t in request.topics:
        parts = []
        for change, (code, message, state) in itertools.islice(answers, len(t.partitions)):
            if code != ErrorCode.NONE and failed is None:
                topic = controller.image.topic_by_id(t.topic_id)
                log.info(
                    "AlterPartition from broker %d for partition %d of topic %s (leader epoch %d, partition "
                    "epoch %d, ISR %s) refused: %s: %s",
                    request.broker_id,
                    change.partition,
                    t.topic_id,
                    change.leader_epoch,
                    change.partition_epoch,
                    change.new_isr,
                    ErrorCode(code).name,
                    message,
                    extra=fields(topic=topic and topic.name, partition=change.partition, peer=request.broker_id),
                )
            parts.append(
                Response.PartitionData(
                    partition_index=change.partition,
                    error_code=code,
                    leader_id=state.leader if state else -1,
                    leader_epoch=state.leader_epoch if state else -1,
                    isr=list(state.isr) if state else [],
                    leader_recovery_state=0,
                    partition_epoch=state.partition_epoch if state else -1,
                )
            )
        topics.append(Response.TopicData(topic_id=t.topic_id, partitions=parts))
    return Response(throttle_time_ms=0, error_code=ErrorCode.NONE, topics=topics)
