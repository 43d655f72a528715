"""Share-group APIs (KIP-932): ShareGroupHeartbeat (76), ShareGroupDescribe (77), ShareFetch
(78), ShareAcknowledge (79). Membership is in coord/share_group.py, delivery state in
broker/share_fetch.py and broker/share_partition.py. Served only with group.share.enable."""

from __future__ import annotations

import trio

from logbroker.broker.handlers.consumer_groups import partitions_by_topic
from logbroker.broker.share_fetch import PartitionResult
from logbroker.broker.share_partition import ShareError
from logbroker.protocol import RESPONSES, ErrorCode


async def share_group_heartbeat(ctx, request):
    Response = RESPONSES[76]
    coord = ctx.broker.groups
    await coord.ensure_offsets_topic()
    out = coord.share.heartbeat(request, ctx.header.client_id or "", "/" + ctx.peer.rsplit(":", 1)[0])
    assignment = None
    if "assignment" in out:
        ids = coord.share.topic_ids()
        assignment = Response.Assignment(topic_partitions=[
            Response.TopicPartitions(topic_id=ids[t], partitions=ps)
            for t, ps in partitions_by_topic(out["assignment"]).items() if t in ids
        ])
    return Response(
        throttle_time_ms=0, error_code=out["error"], error_message=out.get("message"),
        member_id=out.get("member_id"), member_epoch=out.get("member_epoch", -1),
        heartbeat_interval_ms=out.get("heartbeat_interval_ms", 0), assignment=assignment,
    )


async def share_group_describe(ctx, request):
    Response = RESPONSES[77]
    coord = ctx.broker.groups
    ids = coord.share.topic_ids()

    def assignment(parts) -> object:
        return Response.Assignment(topic_partitions=[
            Response.TopicPartitions(topic_id=ids[t], topic_name=t, partitions=ps)
            for t, ps in partitions_by_topic(parts).items() if t in ids
        ])

    out = []
    for gid in request.group_ids:
        code = coord.check_coordinator(gid)
        g = coord.share.groups.get(gid)
        if code or g is None:
            out.append(Response.DescribedGroup(
                error_code=code or ErrorCode.GROUP_ID_NOT_FOUND,
                error_message=None if code else f"group {gid!r} is not a share group",
                group_id=gid, group_state="Dead" if not code else "", group_epoch=-1, assignment_epoch=-1,
                assignor_name="", members=[]))
            continue
        out.append(Response.DescribedGroup(
            error_code=ErrorCode.NONE, group_id=gid, group_state=g.state, group_epoch=g.group_epoch,
            assignment_epoch=g.assignment_epoch, assignor_name="simple",
            members=[
                Response.Member(member_id=m.member_id, rack_id=m.rack_id, member_epoch=m.member_epoch,
                                client_id=m.client_id, client_host=m.client_host,
                                subscribed_topic_names=list(m.subscribed_topics), assignment=assignment(m.assigned))
                for m in g.members.values()
            ],
        ))
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
    return [Endpoint(node_id=b.node_id, host=b.host, port=b.port, rack=b.rack)
            for b in ctx.broker.controller.client_brokers() if b.node_id in wanted]


def _top_error(Response, code: int, message: str, **kw):
    return Response(throttle_time_ms=0, error_code=code, error_message=message, responses=[], node_endpoints=[], **kw)


async def share_fetch(ctx, request):
    Response = RESPONSES[78]
    mgr = ctx.broker.share_fetch
    gid, member = request.group_id, request.member_id
    lock_ms = mgr.lock_duration_ms(gid) if gid else 0
    if not gid or not member:
        return _top_error(Response, ErrorCode.INVALID_REQUEST, "GroupId and MemberId must be set",
                          acquisition_lock_timeout_ms=lock_ms)
    acking = any(p.acknowledgement_batches for t in request.topics for p in t.partitions)
    try:
        session = mgr.session(gid, member, request.share_session_epoch, acking)
    except ShareError as e:
        return _top_error(Response, e.code, str(e), acquisition_lock_timeout_ms=lock_ms)
    names = mgr.topic_names()
    now = trio.current_time()
    results: dict[tuple, object] = {}
    for t in request.topics:
        for p in t.partitions:
            key = (t.topic_id, p.partition_index)
            session.partitions[key] = None
            if not p.acknowledgement_batches:
                continue
            found = mgr.resolve(t.topic_id, p.partition_index, names)
            if not isinstance(found, tuple):
                found.acked = True
                results[key] = found
                continue
            topic, part = found
            code, msg = mgr.acknowledge(gid, member, topic, part, p.acknowledgement_batches, now, ctx.version >= 2)

            results[key] = PartitionResult(t.topic_id, p.partition_index, ack_error=code, ack_message=msg, acked=True)
    for f in request.forgotten_topics_data:
        for idx in f.partitions:
            session.partitions.pop((f.topic_id, idx), None)
    if request.share_session_epoch == -1:
        mgr.close_session(session)
    elif not (ctx.version >= 2 and request.is_renew_ack):  # a renew-only request fetches nothing (KIP-1222)
        targets, waits = [], []
        for (topic_id, idx) in session.partitions:
            found = mgr.resolve(topic_id, idx, names)
            if isinstance(found, tuple):
                targets.append((topic_id, idx, found[0], found[1]))
                waits.append(found[1])
            elif (topic_id, idx) not in results:
                results[(topic_id, idx)] = found
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
        by_topic.setdefault(topic_id, []).append(Response.PartitionData(
            partition_index=idx, error_code=r.error, error_message=r.message,
            acknowledge_error_code=r.ack_error, acknowledge_error_message=r.ack_message,
            current_leader=leader, records=r.records if r.records is not None else b"",
            acquired_records=[Response.AcquiredRecords(first_offset=a, last_offset=b, delivery_count=n)
                              for a, b, n in r.acquired]))
    return Response(
        throttle_time_ms=0, error_code=ErrorCode.NONE, acquisition_lock_timeout_ms=lock_ms,
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
    if request.share_session_epoch == 0:
        return _top_error(Response, ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                          "ShareAcknowledge cannot open a share session (epoch 0)", **extra)
    try:
        session = mgr.session(gid, member, request.share_session_epoch, True)
    except ShareError as e:
        return _top_error(Response, e.code, str(e), **extra)
    names = mgr.topic_names()
    now = trio.current_time()
    out = []
    leaders = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            leader = _leader(ctx, t.topic_id, p.partition_index, names, Response.LeaderIdAndEpoch)
            found = mgr.resolve(t.topic_id, p.partition_index, names)
            if not isinstance(found, tuple):
                code, msg = found.error, found.message
                if code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
                    leaders.append(leader.leader_id)
            else:
                code, msg = mgr.acknowledge(gid, member, found[0], found[1], p.acknowledgement_batches, now,
                                            ctx.version >= 2)
            parts.append(Response.PartitionData(partition_index=p.partition_index, error_code=code, error_message=msg,
                                                current_leader=leader))
        out.append(Response.ShareAcknowledgeTopicResponse(topic_id=t.topic_id, partitions=parts))
    if request.share_session_epoch == -1:
        mgr.close_session(session)
    return Response(throttle_time_ms=0, error_code=ErrorCode.NONE, responses=out,
                    node_endpoints=_node_endpoints(ctx, leaders, Response.NodeEndpoint), **extra)


ENTRIES = [
    (76, 1, 1, share_group_heartbeat),
    (77, 1, 1, share_group_describe),
    (78, 1, 2, share_fetch),
    (79, 1, 2, share_acknowledge),
]
