"""Classic consumer-group APIs: FindCoordinator (10), JoinGroup (11), Heartbeat (12),
LeaveGroup (13), SyncGroup (14), DescribeGroups (15), ListGroups (16),
DeleteGroups (42). The protocol logic lives in coord/groups/group_coordinator.py; these
functions translate requests and responses.

Authorization as Kafka's KafkaApis: FindCoordinator DESCRIBE on the group or transactional
id (CLUSTER_ACTION for a share-partition key); Join, Sync, Heartbeat and Leave READ on the
group; DescribeGroups DESCRIBE on each group; ListGroups every group with DESCRIBE on the
cluster, else those the principal may describe; DeleteGroups DELETE on each group. A denied
group is answered GROUP_AUTHORIZATION_FAILED before anything about it is looked at.

FindCoordinator for groups creates `__consumer_offsets` on first use and never names this
node while it is still loading the group's partition: it waits up to LOAD_WAIT_S for the load,
else answers COORDINATOR_NOT_AVAILABLE (retried by every client), as Kafka does until its
partition is loaded (issue 31: librdkafka does not retry an OffsetCommit answered
COORDINATOR_LOAD_IN_PROGRESS)."""

from __future__ import annotations

import uuid

import trio

from logbroker.common.acl import CLUSTER_NAME
from logbroker.common.acl import AclOperation as Op
from logbroker.common.acl import ResourceType as Res
from logbroker.coord.groups.group import GroupState
from logbroker.coord.groups.offsets_topic import OFFSETS_TOPIC
from logbroker.coord.groups.share_state_log import SHARE_STATE_TOPIC
from logbroker.coord.groups.transaction_log import TRANSACTION_STATE_TOPIC
from logbroker.coord.metadata.control import ControllerError
from logbroker.protocol import RESPONSES, ErrorCode

GROUP_KEY, TRANSACTION_KEY, SHARE_KEY = 0, 1, 2
# how long FindCoordinator waits for this node to load a group's __consumer_offsets
# partition before answering COORDINATOR_NOT_AVAILABLE (the client then asks again)
LOAD_WAIT_S = 3.0


def _client_host(ctx) -> str:
    return "/" + ctx.peer.rsplit(":", 1)[0]


def _share_key_ok(key: str) -> bool:
    """A share coordinator key: "groupId:topicId:partition" (the group id may hold colons)."""
    parts = key.rsplit(":", 2)
    if len(parts) != 3 or not parts[0]:
        return False
    try:
        uuid.UUID(parts[1])
        return int(parts[2]) >= 0
    except ValueError:
        return False


async def find_coordinator(ctx, request):
    Response = RESPONSES[10]
    coord = ctx.broker.groups
    version = ctx.version
    keys = list(request.coordinator_keys) if version >= 4 else [request.key]
    unavailable = None
    txns = ctx.broker.transactions
    # key type 2 (a share-partition's share coordinator) from v6, when share groups are served
    shares_served = version >= 6 and 83 in ctx.handlers and ctx.handlers[83].served_by(ctx.broker)
    # Kafka's rules, before anything else about a key: DESCRIBE on the group or on the
    # transactional id; a share-partition key (brokers') needs CLUSTER_ACTION on the cluster
    denied: dict[str, tuple[int, str]] = {}
    if request.key_type == GROUP_KEY:
        denied = {
            k: (ErrorCode.GROUP_AUTHORIZATION_FAILED, "Group authorization failed.")
            for k in keys
            if not ctx.authorize(Op.DESCRIBE, Res.GROUP, k)
        }
    elif request.key_type == TRANSACTION_KEY:
        denied = {
            k: (ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "Transactional Id authorization failed.")
            for k in keys
            if not ctx.authorize(Op.DESCRIBE, Res.TRANSACTIONAL_ID, k)
        }
    elif (
        request.key_type == SHARE_KEY
        and shares_served
        and not ctx.authorize(Op.CLUSTER_ACTION, Res.CLUSTER, CLUSTER_NAME)
    ):
        denied = {k: (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.") for k in keys}
    keys_allowed = [k for k in keys if k not in denied]
    if request.key_type == GROUP_KEY and any(keys_allowed):
        try:
            await coord.ensure_offsets_topic()
        except ControllerError as e:  # a cluster node that is not the active controller (yet)
            unavailable = f"{OFFSETS_TOPIC} does not exist yet and this node cannot create it: {e.message}"
        else:
            # a group this node coordinates but whose partition it is still loading (the topic
            # just created, leadership just gained): wait a little for the load, else answer
            # COORDINATOR_NOT_AVAILABLE below, which clients retry
            await coord.wait_loaded(keys_allowed, trio.current_time() + LOAD_WAIT_S)
    elif request.key_type == TRANSACTION_KEY and any(keys_allowed):
        try:
            await txns.ensure_state_topic()
        except ControllerError as e:
            unavailable = f"{TRANSACTION_STATE_TOPIC} does not exist yet and this node cannot create it: {e.message}"
    elif request.key_type == SHARE_KEY and shares_served and any(keys_allowed):
        try:
            await ctx.broker.share_coordinator.ensure_state_topic()
        except ControllerError as e:
            unavailable = f"{SHARE_STATE_TOPIC} does not exist yet and this node cannot create it: {e.message}"
    results = []
    for key in keys:
        node, host, port, code, msg = -1, "", -1, ErrorCode.NONE, None
        if key in denied:
            code, msg = denied[key]
        elif unavailable is not None and key:
            code, msg = ErrorCode.COORDINATOR_NOT_AVAILABLE, unavailable
        elif request.key_type not in (GROUP_KEY, TRANSACTION_KEY) and not (
            request.key_type == SHARE_KEY and shares_served
        ):
            code, msg = ErrorCode.INVALID_REQUEST, f"unknown coordinator key type {request.key_type}"
        elif not key:
            code, msg = (
                ErrorCode.INVALID_REQUEST,
                (
                    "empty group id"
                    if request.key_type == GROUP_KEY
                    else "empty transactional id"
                    if request.key_type == TRANSACTION_KEY
                    else "empty share-partition key"
                ),
            )
        elif request.key_type == SHARE_KEY and not _share_key_ok(key):
            code, msg = ErrorCode.INVALID_REQUEST, f"share coordinator key {key!r} is not groupId:topicId:partition"
        else:
            # the leader of the key's partition, wherever it is (the image knows)
            if request.key_type == GROUP_KEY:
                topic, (index, leader) = OFFSETS_TOPIC, coord.coordinator_node(key)
            elif request.key_type == TRANSACTION_KEY:
                topic, (index, leader) = TRANSACTION_STATE_TOPIC, txns.coordinator_node(key)
            else:
                topic, (index, leader) = SHARE_STATE_TOPIC, ctx.broker.share_coordinator.coordinator_node(key)
            b = ctx.controller.image.brokers.get(leader)
            if b is None or b.fenced:
                code, msg = (
                    ErrorCode.COORDINATOR_NOT_AVAILABLE,
                    f"{topic}-{index} has no available leader (leader {leader})",
                )
            elif (
                request.key_type == GROUP_KEY and coord.check_coordinator(key) == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
            ):
                # as Kafka, which answers so until its new partition is loaded: a group's
                # requests would get COORDINATOR_LOAD_IN_PROGRESS, not every client retries it
                code, msg = (
                    ErrorCode.COORDINATOR_NOT_AVAILABLE,
                    f"the coordinator of {topic}-{index} (node {leader}) is loading it",
                )
            else:
                code, node, (host, port) = ErrorCode.NONE, b.node_id, b.endpoint(ctx.listener)
        results.append((key, node, host, port, code, msg))
    if version >= 4:
        return Response(
            throttle_time_ms=0,
            coordinators=[
                Response.Coordinator(key=k, node_id=n, host=h, port=p, error_code=c, error_message=m)
                for k, n, h, p, c, m in results
            ],
        )
    _k, n, h, p, c, m = results[0]
    return Response(
        throttle_time_ms=0, error_code=c, error_message=m if version >= 1 else None, node_id=n, host=h, port=p
    )


async def join_group(ctx, request):
    Response = RESPONSES[11]
    version = ctx.version
    if not ctx.authorize(Op.READ, Res.GROUP, request.group_id):
        return Response(
            throttle_time_ms=0,
            error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
            protocol_name=None if version >= 7 else "",
        )
    res = await ctx.broker.groups.join_group(
        group_id=request.group_id,
        member_id=request.member_id,
        group_instance_id=request.group_instance_id if version >= 5 else None,
        client_id=ctx.header.client_id or "",
        client_host=_client_host(ctx),
        session_timeout_ms=request.session_timeout_ms,
        rebalance_timeout_ms=request.rebalance_timeout_ms if version >= 1 else request.session_timeout_ms,
        protocol_type=request.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in request.protocols],
        require_known_member_id=version >= 4,
        reason=request.reason if version >= 8 else None,
    )
    return Response(
        throttle_time_ms=0,
        error_code=res.error,
        generation_id=res.generation_id,
        protocol_type=res.protocol_type if version >= 7 else None,
        protocol_name=res.protocol_name if (res.protocol_name is not None or version >= 7) else "",
        leader=res.leader_id,
        skip_assignment=res.skip_assignment if version >= 9 else False,
        member_id=res.member_id,
        members=[
            Response.JoinGroupResponseMember(
                member_id=mid, group_instance_id=inst if version >= 5 else None, metadata=meta
            )
            for mid, inst, meta in res.members
        ],
    )


async def sync_group(ctx, request):
    Response = RESPONSES[14]
    version = ctx.version
    if not ctx.authorize(Op.READ, Res.GROUP, request.group_id):
        return Response(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, assignment=b"")
    res = await ctx.broker.groups.sync_group(
        group_id=request.group_id,
        generation_id=request.generation_id,
        member_id=request.member_id,
        group_instance_id=request.group_instance_id if version >= 3 else None,
        protocol_type=request.protocol_type if version >= 5 else None,
        protocol_name=request.protocol_name if version >= 5 else None,
        assignments={a.member_id: bytes(a.assignment) for a in request.assignments},
    )
    return Response(
        throttle_time_ms=0,
        error_code=res.error,
        protocol_type=res.protocol_type if version >= 5 else None,
        protocol_name=res.protocol_name if version >= 5 else None,
        assignment=res.assignment,
    )


async def heartbeat(ctx, request):
    if not ctx.authorize(Op.READ, Res.GROUP, request.group_id):
        return RESPONSES[12](throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    code = ctx.broker.groups.heartbeat(
        group_id=request.group_id,
        generation_id=request.generation_id,
        member_id=request.member_id,
        group_instance_id=request.group_instance_id if ctx.version >= 3 else None,
    )
    return RESPONSES[12](throttle_time_ms=0, error_code=code)


async def leave_group(ctx, request):
    Response = RESPONSES[13]
    version = ctx.version
    if not ctx.authorize(Op.READ, Res.GROUP, request.group_id):
        return Response(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, members=[])
    if version >= 3:
        members = [(m.member_id, m.group_instance_id) for m in request.members]
    else:
        members = [(request.member_id, None)]
    top, codes = ctx.broker.groups.leave_group(request.group_id, members)
    if version < 3:
        return Response(throttle_time_ms=0, error_code=top if top else codes[0])
    return Response(
        throttle_time_ms=0,
        error_code=top,
        members=[
            Response.MemberResponse(member_id=mid, group_instance_id=inst, error_code=c)
            for (mid, inst), c in zip(members, codes)
        ],
    )


async def describe_groups(ctx, request):
    Response = RESPONSES[15]
    coord = ctx.broker.groups
    version = ctx.version
    out = []
    for gid in request.groups:
        if not ctx.authorize(Op.DESCRIBE, Res.GROUP, gid):  # before anything about the group
            out.append(
                Response.DescribedGroup(
                    error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
                    group_id=gid,
                    group_state="",
                    protocol_type="",
                    protocol_data="",
                    members=[],
                )
            )
            continue
        code = coord.check_coordinator(gid)
        group = coord.groups.get(gid)
        if code:
            out.append(
                Response.DescribedGroup(
                    error_code=code, group_id=gid, group_state="", protocol_type="", protocol_data="", members=[]
                )
            )
            continue
        if group is None:
            out.append(
                Response.DescribedGroup(
                    error_code=ErrorCode.GROUP_ID_NOT_FOUND if version >= 6 else ErrorCode.NONE,
                    error_message=f"group {gid!r} does not exist" if version >= 6 else None,
                    group_id=gid,
                    group_state=GroupState.DEAD.value,
                    protocol_type="",
                    protocol_data="",
                    members=[],
                )
            )
            continue
        stable = group.state == GroupState.STABLE
        members = [
            Response.DescribedGroupMember(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id if version >= 4 else None,
                client_id=m.client_id,
                client_host=m.client_host,
                member_metadata=m.metadata_for(group.protocol_name) if stable and group.protocol_name else b"",
                member_assignment=m.assignment if stable else b"",
            )
            for m in group.members.values()
        ]
        out.append(
            Response.DescribedGroup(
                error_code=ErrorCode.NONE,
                group_id=gid,
                group_state=group.state.value,
                protocol_type=group.protocol_type or "",
                protocol_data=(group.protocol_name or "") if stable else "",
                members=members,
            )
        )
    if version >= 3 and request.include_authorized_operations:
        for g in out:
            if g.error_code == ErrorCode.NONE:
                g.authorized_operations = ctx.authorized_operations(Res.GROUP, g.group_id)
    return Response(throttle_time_ms=0, groups=out)


async def list_groups(ctx, request):
    Response = RESPONSES[16]
    version = ctx.version
    states = {s.lower() for s in request.states_filter} if version >= 4 else set()
    types = {t.lower() for t in request.types_filter} if version >= 5 else set()
    coord = ctx.broker.groups
    # DESCRIBE on the cluster lists every group, else only those the principal may describe
    every = ctx.authorize(Op.DESCRIBE, Res.CLUSTER, CLUSTER_NAME)
    listed: dict[str, tuple[str, str, str]] = {}  # id -> (protocol type, state, type)
    for gid, group in coord.groups.items():
        listed[gid] = (group.protocol_type or "", group.state.value, "classic")
    for gid, cg in coord.consumer.groups.items():
        listed[gid] = ("consumer", cg.state, "consumer")
    for gid, sg in coord.share.groups.items():
        listed[gid] = ("share", sg.state, "share")
    for gid, stg in coord.streams.groups.items():
        listed[gid] = ("streams", stg.state, "streams")
    out = []
    for gid, (ptype, state, gtype) in sorted(listed.items()):
        if states and state.lower() not in states:
            continue
        if types and gtype not in types:
            continue
        if not (every or ctx.authorize(Op.DESCRIBE, Res.GROUP, gid)):
            continue
        out.append(
            Response.ListedGroup(
                group_id=gid,
                protocol_type=ptype,
                group_state=state if version >= 4 else "",
                group_type=gtype if version >= 5 else "",
            )
        )
    return Response(throttle_time_ms=0, error_code=ErrorCode.NONE, groups=out)


async def delete_groups(ctx, request):
    Response = RESPONSES[42]
    names = list(dict.fromkeys(request.groups_names))
    deletable = ctx.authorized(Op.DELETE, Res.GROUP, names)
    results = await ctx.broker.groups.delete_groups([g for g in names if g in deletable]) if deletable else {}
    return Response(
        throttle_time_ms=0,
        results=[
            Response.DeletableGroupResult(
                group_id=g,
                error_code=code,
                # v3: why, for a group not deleted (null when it was)
                error_message=f"group {g!r} not deleted: {ErrorCode(code).message}" if code else None,
            )
            for g, code in ((g, results[g] if g in deletable else ErrorCode.GROUP_AUTHORIZATION_FAILED) for g in names)
        ],
    )


ENTRIES = [
    (10, 0, 6, find_coordinator),
    (11, 0, 9, join_group),
    (12, 0, 4, heartbeat),
    (13, 0, 5, leave_group),
    (14, 0, 5, sync_group),
    (15, 0, 6, describe_groups),
    (16, 0, 5, list_groups),
    (42, 0, 3, delete_groups),  # v3: an error message per group
]
