"""AlterPartition (56), on the controller listener only: a partition leader asks the active
controller to change its ISR (coord/metadata/controller.py `alter_partition` has the checks).
Versions 2-3 name topics by id; v3 sends each ISR member with its broker epoch (accepted,
the ids are used). A node that is not the active controller answers NOT_CONTROLLER."""

from __future__ import annotations

import logging

from logbroker.common.acl import CLUSTER_NAME
from logbroker.common.acl import AclOperation as Op
from logbroker.common.acl import ResourceType as Res
from logbroker.coord.metadata.control import ControllerError
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
    topics = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            new_isr = [b.broker_id for b in p.new_isr_with_epochs] if ctx.version >= 3 else list(p.new_isr)
            try:
                code, message, state = await controller.alter_partition(
                    request.broker_id,
                    request.broker_epoch,
                    t.topic_id,
                    p.partition_index,
                    p.leader_epoch,
                    p.partition_epoch,
                    new_isr,
                )
            except ControllerError as e:
                code, message, state = e.code, e.message, None
            if code != ErrorCode.NONE:
                topic = controller.image.topic_by_id(t.topic_id)
                log.info(
                    "AlterPartition from broker %d for partition %d of topic %s (leader epoch %d, partition "
                    "epoch %d, ISR %s) refused: %s: %s",
                    request.broker_id,
                    p.partition_index,
                    t.topic_id,
                    p.leader_epoch,
                    p.partition_epoch,
                    new_isr,
                    ErrorCode(code).name,
                    message,
                    extra=fields(topic=topic and topic.name, partition=p.partition_index, peer=request.broker_id),
                )
            parts.append(
                Response.PartitionData(
                    partition_index=p.partition_index,
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
