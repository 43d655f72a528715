"""Share-group APIs (KIP-932): ShareGroupHeartbeat (76), ShareGroupDescribe (77), ShareFetch
(78), ShareAcknowledge (79), and the share-group offsets at the group coordinator:
DescribeShareGroupOffsets (90), AlterShareGroupOffsets (91), DeleteShareGroupOffsets (92),
read and written at the share coordinators (broker/share_persister.py). Membership is in coord/groups/share_group.py, delivery state in
broker/share_fetch.py and broker/share_partition.py. Served only with group.share.enable.

Authorization as Kafka's: the heartbeat READ on the group and DESCRIBE on its subscribed
topics; the describe DESCRIBE on the group (TOPIC_AUTHORIZATION_FAILED for a group assigned a
topic the principal may not describe); ShareFetch and ShareAcknowledge READ on the group
(top-level GROUP_AUTHORIZATION_FAILED) and on each topic (TOPIC_AUTHORIZATION_FAILED for its
partitions); DescribeShareGroupOffsets DESCRIBE on the group and the topics, AlterShareGroup-
Offsets READ on the group and topics, DeleteShareGroupOffsets DELETE on the group, READ on
the topics."""

from __future__ import annotations

import trio

from logbroker.broker.handlers.consumer_groups import partitions_by_topic, undescribable_topics
from logbroker.broker.share_fetch import PartitionResult
from logbroker.broker.share_partition import ShareError
from logbroker.common.acl import AclOperation as Op
from logbroker.common.acl import ResourceType as Res
from logbroker.coord.groups.state_topic import StateTopicError
from logbroker.protocol import RESPONSES, ZERO_UUID, ErrorCode


async def share_group_heartbeat(ctx, request):
    Response = RESPONSES[76]
    if not ctx.authorize(Op.READ, Res.GROUP, request.group_id):
        return Response(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if request.subscribed_topic_names and len(
        ctx.authorized(Op.DESCRIBE, Res.TOPIC, request.subscribed_topic_names)
    ) < len(set(request.subscribed_topic_names)):  # a subscribed topic it may not describe
        return Response(throttle_time_ms=0, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    coord = ctx.broker.groups
    await coord.ensure_offsets_topic()
    out = coord.share.heartbeat(request, ctx.header.client_id or "", "/" + ctx.peer.rsplit(":", 1)[0])
    assignment = None
    if "assignment" in out:
        ids = coord.share.topic_ids()
        assignment = Response.Assignment(
            topic_partitions=[
                Response.TopicPartitions(topic_id=ids[t], partitions=ps)
                for t, ps in partitions_by_topic(out["assignment"]).items()
                if t in ids
            ]
        )
    return Response(
        throttle_time_ms=0,
        error_code=out["error"],
        error_message=out.get("message"),
        member_id=out.get("member_id"),
        member_epoch=out.get("member_epoch", -1),
        heartbeat_interval_ms=out.get("heartbeat_interval_ms", 0),
        assignment=assignment,
    )


async def share_group_describe(ctx, request):
    Response = RESPONSES[77]
    coord = ctx.broker.groups
    ids = coord.share.topic_ids()

    def assignment(parts) -> object:
        return Response.Assignment(
            topic_partitions=[
                Response.TopicPartitions(topic_id=ids[t], topic_name=t, partitions=ps)
                for t, ps in partitions_by_topic(parts).items()
                if t in ids
            ]
        )

    out = []
    for gid in request.group_ids:
        if not ctx.authorize(Op.DESCRIBE, Res.GROUP, gid):
            out.append(Response.DescribedGroup(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, group_id=gid))
            continue
        code = coord.check_coordinator(gid)
        g = coord.share.groups.get(gid)
        if code or g is None:
            out.append(
                Response.DescribedGroup(
                    error_code=code or ErrorCode.GROUP_ID_NOT_FOUND,
                    error_message=None if code else f"group {gid!r} is not a share group",
                    group_id=gid,
                    group_state="Dead" if not code else "",
                    group_epoch=-1,
                    assignment_epoch=-1,
                    assignor_name="",
                    members=[],
                )
            )
            continue
        out.append(
            Response.DescribedGroup(
                error_code=ErrorCode.NONE,
                group_id=gid,
                group_state=g.state,
                group_epoch=g.group_epoch,
                assignment_epoch=g.assignment_epoch,
                assignor_name="simple",
                members=[
                    Response.Member(
                        member_id=m.member_id,
                        rack_id=m.rack_id,
                        member_epoch=m.member_epoch,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        subscribed_topic_names=list(m.subscribed_topics),
                        assignment=assignment(m.assigned),
                    )
                    for m in g.members.values()
                ],
            )
        )
    if request.include_authorized_operations:
        for g in out:
            if g.error_code == ErrorCode.NONE:
                g.authorized_operations = ctx.authorized_operations(Res.GROUP, g.group_id)
    undescribable_topics(ctx, out, Response)
    return Response(throttle_time_ms=0, groups=out)


def _leader(ctx, topic_id, partition, names, Leader):
    name = names.get(topic_id)
    t = ctx.broker.controller.image.topics.get(name) if name is not None else None
    st = t.partitions.get(partition) if t is not None else None
    if st is None:
        return Leader(leader_id=-1, leader_epoch=-1)
    return Leader(leader_id=st.leader, leader_epoch=st.leader_epoch)


def _node_endpoints(ctx, leaders, Endpoint):
    wanted = {lead for lead in leaders if lead >= 0}
    return [
        Endpoint(node_id=b.node_id, host=host, port=port, rack=b.rack)
        for b in ctx.broker.controller.client_brokers()
        if b.node_id in wanted
        for host, port in [b.endpoint(ctx.listener)]
    ]


def _resolver(ctx, mgr, names):
    """`mgr.resolve` for this principal: a topic it may not READ answers
    TOPIC_AUTHORIZATION_FAILED, for fetches and acknowledgements alike (Kafka's rule)."""
    may_read: dict[str, bool] = {}

    def resolve(topic_id, partition: int):
        name = names.get(topic_id)
        if name is not None:
            if name not in may_read:
                may_read[name] = ctx.authorize(Op.READ, Res.TOPIC, name)
            if not may_read[name]:
                return PartitionResult(
                    topic_id, partition, ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed."
                )
        return mgr.resolve(topic_id, partition, names)

    return resolve


def _top_error(Response, code: int, message: str, **kw):
    return Response(throttle_time_ms=0, error_code=code, error_message=message, responses=[], node_endpoints=[], **kw)


async def share_fetch(ctx, request):
    Response = RESPONSES[78]
    mgr = ctx.broker.share_fetch
    gid, member = request.group_id, request.member_id
    lock_ms = mgr.lock_duration_ms(gid) if gid else 0
    if not gid or not member:
        return _top_error(
            Response, ErrorCode.INVALID_REQUEST, "GroupId and MemberId must be set", acquisition_lock_timeout_ms=lock_ms
        )
    if not ctx.authorize(Op.READ, Res.GROUP, gid):
        return _top_error(
            Response,
            ErrorCode.GROUP_AUTHORIZATION_FAILED,
            "Group authorization failed.",
            acquisition_lock_timeout_ms=lock_ms,
        )
    acking = any(p.acknowledgement_batches for t in request.topics for p in t.partitions)
    try:
        session = mgr.session(gid, member, request.share_session_epoch, acking)
    except ShareError as e:
        return _top_error(Response, e.code, str(e), acquisition_lock_timeout_ms=lock_ms)
    names = mgr.topic_names()
    resolve = _resolver(ctx, mgr, names)
    results: dict[tuple, object] = {}
    for t in request.topics:
        for p in t.partitions:
            key = (t.topic_id, p.partition_index)
            mgr.hold(session, key)
            if not p.acknowledgement_batches:
                continue
            found = resolve(t.topic_id, p.partition_index)
            if not isinstance(found, tuple):
                found.acked = True
                results[key] = found
                continue
            topic, part = found
            code, msg = await mgr.acknowledge(
                gid, member, t.topic_id, topic, part, p.acknowledgement_batches, ctx.version >= 2
            )

            results[key] = PartitionResult(t.topic_id, p.partition_index, ack_error=code, ack_message=msg, acked=True)
    for f in request.forgotten_topics_data:
        for idx in f.partitions:
            mgr.forget(session, (f.topic_id, idx))
    if request.share_session_epoch == -1:
        mgr.close_session(session)
    elif not (ctx.version >= 2 and request.is_renew_ack):  # a renew-only request fetches nothing (KIP-1222)
        targets = []
        for topic_id, idx in session.partitions:
            found = resolve(topic_id, idx)
            if isinstance(found, tuple):
                targets.append((topic_id, idx, found[0], found[1]))
            elif (topic_id, idx) not in results:
                results[(topic_id, idx)] = found
        failed = await mgr.load_all(gid, targets)
        for k, r in failed.items():
            if k in results:
                results[k].error, results[k].message = r.error, r.message
            else:
                results[k] = r
        targets = [t for t in targets if (t[0], t[1]) not in failed]
        waits = [t[3] for t in targets]
        max_records = request.max_records if request.max_records > 0 else 500
        max_bytes = request.max_bytes if request.max_bytes > 0 else 2**31 - 1
        deadline = trio.current_time() + max(0, request.max_wait_ms) / 1000
        while True:
            got = mgr.acquire(session, targets, trio.current_time(), max_records, max_bytes)
            if got or trio.current_time() >= deadline or not targets:
                break
            await mgr.wait(gid, waits, deadline)

        for (topic_id, idx), (data, acquired) in got.items():
            r = results.get((topic_id, idx))
            if r is None:
                r = results[(topic_id, idx)] = PartitionResult(topic_id, idx)
            r.records, r.acquired = data, acquired
    by_topic: dict = {}
    leaders = []
    for (topic_id, idx), r in results.items():
        if not r.worth_sending:
            continue
        leader = _leader(ctx, topic_id, idx, names, Response.LeaderIdAndEpoch)
        if r.error == ErrorCode.NOT_LEADER_OR_FOLLOWER:
            leaders.append(leader.leader_id)
        by_topic.setdefault(topic_id, []).append(
            Response.PartitionData(
                partition_index=idx,
                error_code=r.error,
                error_message=r.message,
                acknowledge_error_code=r.ack_error,
                acknowledge_error_message=r.ack_message,
                current_leader=leader,
                records=r.records if r.records is not None else b"",
                acquired_records=[
                    Response.AcquiredRecords(first_offset=a, last_offset=b, delivery_count=n) for a, b, n in r.acquired
                ],
            )
        )
    return Response(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        acquisition_lock_timeout_ms=lock_ms,
        responses=[Response.ShareFetchableTopicResponse(topic_id=tid, partitions=ps) for tid, ps in by_topic.items()],
        node_endpoints=_node_endpoints(ctx, leaders, Response.NodeEndpoint),
    )


async def share_acknowledge(ctx, request):
    Response = RESPONSES[79]
    mgr = ctx.broker.share_fetch
    gid, member = request.group_id, request.member_id
    extra = {"acquisition_lock_timeout_ms": mgr.lock_duration_ms(gid) if gid else 0} if ctx.version >= 2 else {}
    if not gid or not member:
        return _top_error(Response, ErrorCode.INVALID_REQUEST, "GroupId and MemberId must be set", **extra)
    if not ctx.authorize(Op.READ, Res.GROUP, gid):
        return _top_error(Response, ErrorCode.GROUP_AUTHORIZATION_FAILED, "Group authorization failed.", **extra)
    if request.share_session_epoch == 0:
        return _top_error(
            Response,
            ErrorCode.INVALID_SHARE_SESSION_EPOCH,
            "ShareAcknowledge cannot open a share session (epoch 0)",
            **extra,
        )
    try:
        session = mgr.session(gid, member, request.share_session_epoch, True)
    except ShareError as e:
        return _top_error(Response, e.code, str(e), **extra)
    names = mgr.topic_names()
    resolve = _resolver(ctx, mgr, names)
    out = []
    leaders = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            leader = _leader(ctx, t.topic_id, p.partition_index, names, Response.LeaderIdAndEpoch)
            found = resolve(t.topic_id, p.partition_index)
            if not isinstance(found, tuple):
                code, msg = found.error, found.message
                if code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
                    leaders.append(leader.leader_id)
            else:
                code, msg = await mgr.acknowledge(
                    gid, member, t.topic_id, found[0], found[1], p.acknowledgement_batches, ctx.version >= 2
                )
            parts.append(
                Response.PartitionData(
                    partition_index=p.partition_index, error_code=code, error_message=msg, current_leader=leader
                )
            )
        out.append(Response.ShareAcknowledgeTopicResponse(topic_id=t.topic_id, partitions=parts))
    if request.share_session_epoch == -1:
        mgr.close_session(session)
    return Response(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        responses=out,
        node_endpoints=_node_endpoints(ctx, leaders, Response.NodeEndpoint),
        **extra,
    )


def _topic_parts(ctx, names: list[tuple[str, list[int] | None]] | None):
    """[(topic name, topic id or None (unknown), [partitions])] for the named topics (all
    partitions when None), or every topic but the internal ones."""
    topics = ctx.broker.controller.image.topics
    if names is None:
        names = [(t, None) for t in sorted(topics) if not t.startswith("__")]
    out = []
    for name, parts in names:
        t = topics.get(name)
        if t is None:
            out.append((name, None, list(parts or [])))
        else:
            out.append((name, t.topic_id, sorted(t.partitions) if parts is None else list(parts)))
    return out


async def _offsets_owner(ctx, gid: str, need_empty: bool):
    """(group coordinator, persister, (error code, message) of offsets_check) for the share-group
    offset APIs."""
    coord = ctx.broker.groups
    await coord.ensure_offsets_topic()
    return coord, ctx.broker.share_fetch.persister, coord.share.offsets_check(gid, need_empty)


async def describe_share_group_offsets(ctx, request):
    Response = RESPONSES[90]
    groups = []
    for g in request.groups:
        gid = g.group_id
        if not ctx.authorize(Op.DESCRIBE, Res.GROUP, gid):
            groups.append(
                Response.DescribeShareGroupOffsetsResponseGroup(
                    group_id=gid,
                    topics=[],
                    error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
                    error_message="Group authorization failed.",
                )
            )
            continue
        coord, persister, (code, msg) = await _offsets_owner(ctx, gid, need_empty=False)
        if code:
            groups.append(
                Response.DescribeShareGroupOffsetsResponseGroup(
                    group_id=gid, topics=[], error_code=code, error_message=msg
                )
            )
            continue
        # only topics the principal may describe: the others left out of "all", refused when named
        described = ctx.authorized(Op.DESCRIBE, Res.TOPIC, [t.topic_name for t in g.topics or []])
        wanted = (
            None
            if g.topics is None
            else [(t.topic_name, list(t.partitions)) for t in g.topics if t.topic_name in described]
        )
        topic_parts = _topic_parts(ctx, wanted)
        if wanted is None:
            shown = ctx.authorized(Op.DESCRIBE, Res.TOPIC, [name for name, _, _ in topic_parts])
            topic_parts = [tp for tp in topic_parts if tp[0] in shown]
        known = [(tid, p) for _, tid, ps in topic_parts if tid is not None for p in ps]
        states = await persister.summaries(gid, known) if known else {}
        ends: dict[tuple[str, int], int] = {}
        if ctx.version >= 1:  # KIP-1226 lag: the HW less what the group has not yet completed
            with_state = [
                (name, p)
                for name, tid, ps in topic_parts
                if tid is not None
                for p in ps
                if not states[(tid, p)][0] and states[(tid, p)][4] >= 0
            ]
            ends = await persister.end_offsets(ctx.replicas, with_state) if with_state else {}
        topics = []
        for name, tid, ps in topic_parts:
            parts = []
            for p in ps:
                if tid is None:
                    parts.append(
                        Response.DescribeShareGroupOffsetsResponsePartition(
                            partition_index=p,
                            start_offset=-1,
                            leader_epoch=-1,
                            error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                            error_message=f"topic {name!r} does not exist",
                        )
                    )
                    continue
                err, emsg, _state_epoch, leader_epoch, start, complete = states[(tid, p)]
                if wanted is None and (err or start < 0):
                    continue  # all topics: only the partitions the group has state for
                end = ends.get((name, p), -1)
                lag = max(0, end - start - complete) if min(end, start, complete) >= 0 else -1
                parts.append(
                    Response.DescribeShareGroupOffsetsResponsePartition(
                        partition_index=p,
                        start_offset=start,
                        leader_epoch=leader_epoch,
                        lag=lag,
                        error_code=err,
                        error_message=emsg,
                    )
                )
            if parts:
                topics.append(
                    Response.DescribeShareGroupOffsetsResponseTopic(
                        topic_name=name, topic_id=tid or ZERO_UUID, partitions=parts
                    )
                )
        for t in g.topics or []:
            if t.topic_name not in described:
                topics.append(
                    Response.DescribeShareGroupOffsetsResponseTopic(
                        topic_name=t.topic_name,
                        topic_id=ZERO_UUID,
                        partitions=[
                            Response.DescribeShareGroupOffsetsResponsePartition(
                                partition_index=p,
                                start_offset=-1,
                                leader_epoch=-1,
                                error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                error_message="Topic authorization failed.",
                            )
                            for p in t.partitions
                        ],
                    )
                )
        if wanted is None and not topics and gid not in coord.share.groups:
            groups.append(
                Response.DescribeShareGroupOffsetsResponseGroup(
                    group_id=gid,
                    topics=[],
                    error_code=ErrorCode.GROUP_ID_NOT_FOUND,
                    error_message=f"share group {gid!r} does not exist",
                )
            )
            continue
        groups.append(Response.DescribeShareGroupOffsetsResponseGroup(group_id=gid, topics=topics))
    return Response(throttle_time_ms=0, groups=groups)


async def alter_share_group_offsets(ctx, request):
    Response = RESPONSES[91]
    gid = request.group_id
    if not ctx.authorize(Op.READ, Res.GROUP, gid):
        return Response(
            throttle_time_ms=0,
            error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
            error_message="Group authorization failed.",
            responses=[],
        )
    coord, persister, (code, msg) = await _offsets_owner(ctx, gid, need_empty=True)
    if code:
        return Response(throttle_time_ms=0, error_code=code, error_message=msg, responses=[])
    out = []
    for t in request.topics:
        if not ctx.authorize(Op.READ, Res.TOPIC, t.topic_name):
            out.append(
                Response.AlterShareGroupOffsetsResponseTopic(
                    topic_name=t.topic_name,
                    topic_id=ZERO_UUID,
                    partitions=[
                        Response.AlterShareGroupOffsetsResponsePartition(
                            partition_index=p.partition_index,
                            error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                            error_message="Topic authorization failed.",
                        )
                        for p in t.partitions
                    ],
                )
            )
            continue
        [(name, tid, _)] = _topic_parts(ctx, [(t.topic_name, [p.partition_index for p in t.partitions])])
        parts = []
        states = await persister.summaries(gid, [(tid, p.partition_index) for p in t.partitions]) if tid else {}
        for p in t.partitions:
            err, emsg = ErrorCode.NONE, None
            if tid is None or p.partition_index not in ctx.broker.controller.image.topics[name].partitions:
                err, emsg = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{name}-{p.partition_index} does not exist"
            elif p.start_offset < 0:
                err, emsg = ErrorCode.INVALID_REQUEST, f"{name}-{p.partition_index}: start offset {p.start_offset} < 0"
            elif states[(tid, p.partition_index)][0]:
                err, emsg = states[(tid, p.partition_index)][:2]
            else:
                # a new state epoch: the partition's leader drops what it holds (fenced) and reads this back
                try:
                    await persister.initialize(
                        (gid, tid, p.partition_index), states[(tid, p.partition_index)][2] + 1, p.start_offset
                    )
                except StateTopicError as e:
                    err, emsg = e.code, str(e)
            parts.append(
                Response.AlterShareGroupOffsetsResponsePartition(
                    partition_index=p.partition_index, error_code=err, error_message=emsg
                )
            )
        out.append(
            Response.AlterShareGroupOffsetsResponseTopic(topic_name=name, topic_id=tid or ZERO_UUID, partitions=parts)
        )
    coord.share.note_group(gid)
    return Response(throttle_time_ms=0, error_code=ErrorCode.NONE, responses=out)


async def delete_share_group_offsets(ctx, request):
    Response = RESPONSES[92]
    gid = request.group_id
    if not ctx.authorize(Op.DELETE, Res.GROUP, gid):
        return Response(
            throttle_time_ms=0,
            error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
            error_message="Group authorization failed.",
            responses=[],
        )
    coord, persister, (code, msg) = await _offsets_owner(ctx, gid, need_empty=True)
    if code:
        return Response(throttle_time_ms=0, error_code=code, error_message=msg, responses=[])
    out = []
    readable = ctx.authorized(Op.READ, Res.TOPIC, [t.topic_name for t in request.topics])
    for name, tid, ps in _topic_parts(ctx, [(t.topic_name, None) for t in request.topics]):
        err, emsg = ErrorCode.NONE, None
        if name not in readable:
            err, emsg, tid = ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed.", None
        elif tid is None:
            err, emsg = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist"
        else:
            try:
                for p in ps:
                    await persister.delete((gid, tid, p))
            except StateTopicError as e:
                err, emsg = e.code, str(e)
        out.append(
            Response.DeleteShareGroupOffsetsResponseTopic(
                topic_name=name, topic_id=tid or ZERO_UUID, error_code=err, error_message=emsg
            )
        )
    return Response(throttle_time_ms=0, error_code=ErrorCode.NONE, responses=out)


ENTRIES = [
    (76, 1, 1, share_group_heartbeat),
    (77, 1, 1, share_group_describe),
    (78, 1, 2, share_fetch),
    (79, 1, 2, share_acknowledge),
    (90, 0, 1, describe_share_group_offsets),
    (91, 0, 0, alter_share_group_offsets),
    (92, 0, 0, delete_share_group_offsets),
]
