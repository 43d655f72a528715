"""DescribeQuorum (55): the controller quorum (`kafka-metadata-quorum describe --status`).

Served by every node (a single node is a quorum of one voter). The active
controller answers from its Raft state: leader, leader epoch (the Raft term), high
watermark (the commit index), and per voter its log end offset (the index the leader knows
it holds), the time of its last message and the last time it was seen caught up, and the
same for each observer (a broker-only node, a Raft learner); from v2 each voter's directory
id (the zero id for voters configured by controller.quorum.voters) and every voter's
controller endpoint, from the voter directory (KIP-853). Another
node forwards the request to the active controller; on the controller listener a node that
is not the leader answers NOT_LEADER_OR_FOLLOWER for the partition, as Kafka does. It needs
DESCRIBE on the cluster (else CLUSTER_AUTHORIZATION_FAILED), as Kafka.
"""

from __future__ import annotations

from logbroker.common import directory_id
from logbroker.common.acl import CLUSTER_NAME
from logbroker.common.acl import AclOperation as Op
from logbroker.common.acl import ResourceType as Res
from logbroker.coord.metadata.controller_channel import ControllerUnavailable, serving_controller_listener
from logbroker.protocol import RESPONSES, ErrorCode

API_KEY = 55
MIN_VERSION = 0
MAX_VERSION = 2

Response = RESPONSES[API_KEY]
METADATA_TOPIC = "__cluster_metadata"


def _partition(index: int, leader: dict | None, error: ErrorCode, message: str | None):
    if leader is None:
        return Response.PartitionData(
            partition_index=index,
            error_code=error,
            error_message=message,
            leader_id=-1,
            leader_epoch=-1,
            high_watermark=-1,
            current_voters=[],
            observers=[],
        )

    def replicas(kind: str) -> list:
        directory = leader["directory_ids"]
        return [
            Response.ReplicaState(
                replica_id=n,
                log_end_offset=leo,
                last_fetch_timestamp=fetched,
                last_caught_up_timestamp=caught,
                replica_directory_id=directory_id.parse(
                    directory.get(n, directory_id.ZERO) if kind == "voters" else directory_id.ZERO
                ),
            )
            for n, leo, fetched, caught in leader[kind]
        ]

    return Response.PartitionData(
        partition_index=index,
        error_code=ErrorCode.NONE,
        error_message=None,
        leader_id=leader["leader_id"],
        leader_epoch=leader["term"],
        high_watermark=leader["commit_index"],
        current_voters=replicas("voters"),
        observers=replicas("observers"),
    )


def _nodes(ctx) -> list:
    name = ctx.broker.config.get_str("controller.listener.names").split(",")[0].strip()
    # a single node without a controller listener has no address to give
    return [
        Response.Node(node_id=n, listeners=[Response.Listener(name=name, host=h, port=p)] if p else [])
        for n, (h, p) in sorted(ctx.broker.quorum.voters.items())
    ]


async def handle(ctx, request):
    if not ctx.authorize(Op.DESCRIBE, Res.CLUSTER, CLUSTER_NAME):
        return Response(
            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            error_message="Cluster authorization failed.",
            topics=[],
            nodes=[],
        )
    quorum = ctx.broker.quorum
    if not quorum.is_active and not serving_controller_listener.get():
        try:
            return await ctx.controller.forwarder.client.request(
                API_KEY,
                ctx.version,
                request,
                10.0,
                retry_on=lambda r: any(
                    p.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER for t in r.topics for p in t.partitions
                ),
            )
        except ControllerUnavailable as e:
            return Response(error_code=ErrorCode.NOT_CONTROLLER, error_message=str(e), topics=[], nodes=[])
    state = quorum.describe() if quorum.is_active else None
    topics = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            if t.topic_name != METADATA_TOPIC or p.partition_index != 0:
                parts.append(
                    _partition(
                        p.partition_index,
                        None,
                        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        f"{t.topic_name}-{p.partition_index} is not the metadata log ({METADATA_TOPIC}-0)",
                    )
                )
            elif state is None:
                parts.append(
                    _partition(
                        0,
                        None,
                        ErrorCode.NOT_LEADER_OR_FOLLOWER,
                        f"node {ctx.broker.node_id} is not the active controller "
                        f"(leader {quorum.leader_id or 'unknown'})",
                    )
                )
            else:
                parts.append(_partition(0, state, ErrorCode.NONE, None))
        topics.append(Response.TopicData(topic_name=t.topic_name, partitions=parts))
    return Response(error_code=ErrorCode.NONE, error_message=None, topics=topics, nodes=_nodes(ctx))
