"""KIP-848 consumer-group APIs: ConsumerGroupHeartbeat (68), ConsumerGroupDescribe (69).
The logic is in coord/consumer_group.py."""

from __future__ import annotations

from logbroker.protocol import RESPONSES, ErrorCode


def partitions_by_topic(parts) -> dict[str, list[int]]:
    """(topic, partition) pairs as topic -> sorted partitions, topics sorted (assignments in responses)."""
    out: dict[str, list[int]] = {}
    for t, p in sorted(parts):
        out.setdefault(t, []).append(p)
    return out


async def consumer_group_heartbeat(ctx, request):
    Response = RESPONSES[68]
    coord = ctx.broker.groups
    await coord.ensure_offsets_topic()
    out = coord.consumer.heartbeat(request, ctx.version, ctx.header.client_id or "", "/" + ctx.peer.rsplit(":", 1)[0])
    assignment = None
    if "assignment" in out:
        ids, _ = coord.consumer._topic_ids()
        assignment = Response.Assignment(topic_partitions=[
            Response.TopicPartitions(topic_id=ids[t], partitions=ps)
            for t, ps in partitions_by_topic(out["assignment"]).items() if t in ids
        ])
    return Response(
        throttle_time_ms=0,
        error_code=out["error"],
        error_message=out.get("message"),
        member_id=out.get("member_id"),
        member_epoch=out.get("member_epoch", -1),
        heartbeat_interval_ms=out.get("heartbeat_interval_ms", 0),
        assignment=assignment,
    )


async def consumer_group_describe(ctx, request):
    Response = RESPONSES[69]
    coord = ctx.broker.groups
    ids, _ = coord.consumer._topic_ids()

    def assignment(parts) -> object:
        return Response.Assignment(topic_partitions=[
            Response.TopicPartitions(topic_id=ids[t], topic_name=t, partitions=ps)
            for t, ps in partitions_by_topic(parts).items() if t in ids
        ])

    out = []
    for gid in request.group_ids:
        code = coord.check_coordinator(gid)
        g = coord.consumer.groups.get(gid)
        if code or g is None:
            out.append(Response.DescribedGroup(
                error_code=code or ErrorCode.GROUP_ID_NOT_FOUND,
                error_message=None if code else f"group {gid!r} is not a consumer group",
                group_id=gid, group_state="Dead" if not code else "", group_epoch=-1, assignment_epoch=-1,
                assignor_name="", members=[]))
            continue
        out.append(Response.DescribedGroup(
            error_code=ErrorCode.NONE, group_id=gid, group_state=g.state, group_epoch=g.group_epoch,
            assignment_epoch=g.assignment_epoch, assignor_name=g.assignor,
            members=[
                Response.Member(
                    member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id, member_epoch=m.member_epoch,
                    client_id=m.client_id, client_host=m.client_host, subscribed_topic_names=list(m.subscribed_topics),
                    subscribed_topic_regex=m.subscribed_regex, assignment=assignment(m.assigned),
                    target_assignment=assignment(g.target.get(m.member_id, set())),
                    member_type=0 if ctx.version >= 1 else -1,
                )
                for m in g.members.values()
            ],
        ))
    return Response(throttle_time_ms=0, groups=out)


ENTRIES = [
    (68, 0, 1, consumer_group_heartbeat),
    (69, 0, 1, consumer_group_describe),
]
