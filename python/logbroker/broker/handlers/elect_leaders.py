"""ElectLeaders (43): preferred (type 0) or unclean (type 1) leader election, decided by the
active controller (see coord/metadata/elections.py). v0 has no election type (preferred) and no
top-level error code. TopicPartitions null asks for every partition; the answer then lists
only the partitions an election was tried for (none of ELECTION_NOT_NEEDED), as Kafka's.
Needs ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED."""

from __future__ import annotations

from logbroker.common.acl import CLUSTER_NAME
from logbroker.common.acl import AclOperation as Op
from logbroker.common.acl import ResourceType as Res
from logbroker.coord.metadata.control import ControllerError
from logbroker.coord.metadata.controller_forwarding import client_timeout
from logbroker.protocol import RESPONSES, ErrorCode

API_KEY = 43
MIN_VERSION = 0
MAX_VERSION = 2

Response = RESPONSES[API_KEY]


async def handle(ctx, request):
    election_type = request.election_type if ctx.version >= 1 else 0
    wanted = (
        None if request.topic_partitions is None else [(t.topic, list(t.partitions)) for t in request.topic_partitions]
    )
    if not ctx.authorize(Op.ALTER, Res.CLUSTER, CLUSTER_NAME):  # Kafka: top-level and on every partition named
        code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return Response(
            throttle_time_ms=0,
            error_code=code if ctx.version >= 1 else 0,
            replica_election_results=[
                Response.ReplicaElectionResult(
                    topic=n,
                    partition_result=[
                        Response.PartitionResult(
                            partition_id=i, error_code=code, error_message="Cluster authorization failed."
                        )
                        for i in ps
                    ],
                )
                for n, ps in wanted or []
            ],
        )
    try:
        with client_timeout(request.timeout_ms):
            results = await ctx.controller.elect_leaders(election_type, wanted)
    except ControllerError as e:
        if ctx.version >= 1:
            return Response(throttle_time_ms=0, error_code=e.code, replica_election_results=[])
        results = [(n, i, e.code, e.message) for n, ps in wanted or [] for i in ps]
    by_topic: dict[str, list] = {}
    for name, i, code, message in results:
        by_topic.setdefault(name, []).append(
            Response.PartitionResult(partition_id=i, error_code=code, error_message=message or None)
        )
    return Response(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        replica_election_results=[
            Response.ReplicaElectionResult(topic=n, partition_result=ps) for n, ps in by_topic.items()
        ],
    )
