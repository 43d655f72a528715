"""AddRaftVoter (80), RemoveRaftVoter (81) and UpdateRaftVoter (82): the controller
quorum's voter set (KIP-853;
`kafka-metadata-quorum add-controller|remove-controller`, the Java Admin's `addRaftVoter`
and `removeRaftVoter`, `logbroker cluster add-voter|remove-voter`).

The active controller changes the voter set (coord/metadata/metadata_quorum.py `add_voter`,
`remove_voter`): a new voter must be an observer of the metadata log that has caught up (a
controller started with `controller.quorum.bootstrap.servers`); it is added to the voter
directory (its endpoint, its directory id), then made a voter by a Raft configuration
change, one change at a time; the answer comes once the change is committed (v1's
AckWhenCommitted=false answers the same way: a change is never reported before it commits).
A removed voter leaves Raft's configuration first, then the directory; a leader that
removed itself hands leadership to a caught-up voter. Another broker forwards the request to
the active controller; on the controller listener a node that is not the leader answers
NOT_LEADER_OR_FOLLOWER. Both need ALTER on the cluster, as Kafka.

UpdateRaftVoter (controller listener only, as Kafka) gives a voter's new controller endpoint;
the active controller writes it to the voter directory (a VoterEndpoint record, which a voter
that restarted on another address also writes itself) and answers with the current leader.

Errors: INCONSISTENT_CLUSTER_ID (a cluster id that is not this cluster's), DUPLICATE_VOTER
(already a voter), VOTER_NOT_FOUND (no such voter, or another directory id),
REQUEST_TIMED_OUT (the observer did not catch up, or the change did not commit, within
TimeoutMs; for RemoveRaftVoter, 30 s), INVALID_REQUEST (no endpoint for the controller
listener, the last voter).
"""

from __future__ import annotations

from logbroker.common import directory_id
from logbroker.common.acl import CLUSTER_NAME
from logbroker.common.acl import AclOperation as Op
from logbroker.common.acl import ResourceType as Res
from logbroker.coord.metadata.controller_channel import ControllerUnavailable, serving_controller_listener
from logbroker.coord.metadata.metadata_quorum import VoterChangeError
from logbroker.protocol import RESPONSES, ErrorCode

ADD_RAFT_VOTER = 80
REMOVE_RAFT_VOTER = 81
UPDATE_RAFT_VOTER = 82
REMOVE_TIMEOUT = 30.0


async def _common(ctx, request, api_key: int):
    """The answer every request gets before the change itself, or None to go on."""
    Response = RESPONSES[api_key]
    if not ctx.authorize(Op.ALTER, Res.CLUSTER, CLUSTER_NAME):
        return Response(
            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message="Cluster authorization failed."
        )
    quorum = ctx.broker.quorum
    if request.cluster_id is not None and request.cluster_id != quorum.cluster_id:
        return Response(
            error_code=ErrorCode.INCONSISTENT_CLUSTER_ID,
            error_message=f"cluster id {request.cluster_id!r} is not this cluster's ({quorum.cluster_id})",
        )
    if not quorum.is_active:
        if serving_controller_listener.get():
            return Response(
                error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER,
                error_message=f"node {ctx.broker.node_id} is not the active controller (leader "
                f"{quorum.leader_id or 'unknown'})",
            )
        try:
            return await ctx.controller.forwarder.client.request(
                api_key, ctx.version, request, 60.0, retry_on=lambda r: r.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
            )
        except ControllerUnavailable as e:
            return Response(error_code=ErrorCode.NOT_CONTROLLER, error_message=str(e))
    return None


async def add_raft_voter(ctx, request):
    Response = RESPONSES[ADD_RAFT_VOTER]
    early = await _common(ctx, request, ADD_RAFT_VOTER)
    if early is not None:
        return early
    quorum = ctx.broker.quorum
    names = [n.strip().upper() for n in ctx.broker.config.get_str("controller.listener.names").split(",")]
    endpoint = next(((lis.host, lis.port) for lis in request.listeners if lis.name.upper() in names), None)
    if endpoint is None:
        return Response(
            error_code=ErrorCode.INVALID_REQUEST,
            error_message=f"voter {request.voter_id} has no endpoint for the controller listener "
            f"{'/'.join(names)} (listeners given: "
            f"{[(lis.name, lis.host, lis.port) for lis in request.listeners]})",
        )
    try:
        await quorum.add_voter(
            request.voter_id,
            directory_id.text(request.voter_directory_id),
            endpoint,
            max(0.1, request.timeout_ms / 1000),
        )
    except VoterChangeError as e:
        return Response(error_code=e.code, error_message=str(e))
    return Response(error_code=ErrorCode.NONE, error_message=None)


async def remove_raft_voter(ctx, request):
    Response = RESPONSES[REMOVE_RAFT_VOTER]
    early = await _common(ctx, request, REMOVE_RAFT_VOTER)
    if early is not None:
        return early
    try:
        await ctx.broker.quorum.remove_voter(
            request.voter_id, directory_id.text(request.voter_directory_id), REMOVE_TIMEOUT
        )
    except VoterChangeError as e:
        return Response(error_code=e.code, error_message=str(e))
    return Response(error_code=ErrorCode.NONE, error_message=None)


async def update_raft_voter(ctx, request):
    Response = RESPONSES[UPDATE_RAFT_VOTER]
    quorum = ctx.broker.quorum

    def answer(code: ErrorCode) -> object:
        leader = quorum.voters.get(quorum.leader_id, ("", 0))
        return Response(
            error_code=code,
            current_leader=Response.CurrentLeader(
                leader_id=quorum.leader_id or -1,
                leader_epoch=quorum.node.term if quorum.node else -1,
                host=leader[0],
                port=leader[1],
            ),
        )

    if not ctx.authorize(Op.CLUSTER_ACTION, Res.CLUSTER, CLUSTER_NAME):
        return answer(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    if request.cluster_id is not None and request.cluster_id != quorum.cluster_id:
        return answer(ErrorCode.INCONSISTENT_CLUSTER_ID)
    if not quorum.is_active:
        return answer(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    names = [n.strip().upper() for n in ctx.broker.config.get_str("controller.listener.names").split(",")]
    endpoint = next(((lis.host, lis.port) for lis in request.listeners if lis.name.upper() in names), None)
    if endpoint is None:
        return answer(ErrorCode.INVALID_REQUEST)
    try:
        await quorum.update_voter(request.voter_id, directory_id.text(request.voter_directory_id), endpoint)
    except VoterChangeError as e:
        return answer(e.code)
    return answer(ErrorCode.NONE)


ENTRIES = [
    (ADD_RAFT_VOTER, 0, 1, add_raft_voter),
    (REMOVE_RAFT_VOTER, 0, 0, remove_raft_voter),
]
