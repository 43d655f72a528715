"""KIP-848 consumer-group APIs: ConsumerGroupHeartbeat (68), ConsumerGroupDescribe (69).
The logic is in coord/groups/consumer_group.py.

Authorization as Kafka's: the heartbeat needs READ on the group and DESCRIBE on every topic
it subscribes to by name (else TOPIC_AUTHORIZATION_FAILED), and a regex subscription matches
only topics the member's principal may describe; the describe needs DESCRIBE on the group and
answers TOPIC_AUTHORIZATION_FAILED for a group assigned a topic the principal may not describe."""

from __future__ import annotations

from logbroker.common.acl import AclOperation as Op
from logbroker.common.acl import ResourceType as Res
from logbroker.protocol import RESPONSES, ErrorCode


def partitions_by_topic(parts) -> dict[str, list[int]]:
    """(topic, partition) pairs as topic -> sorted partitions, topics sorted (assignments in responses)."""
    out: dict[str, list[int]] = {}
    for t, p in sorted(parts):
        out.setdefault(t, []).append(p)
    return out


def topic_filter(ctx):
    """What a regex subscription may match for this principal: the topics it may describe
    (Kafka's coordinator resolves a member's regex so); None without authorization."""
    if not getattr(ctx.broker.authorizer, "enabled", False):
        return None
    return lambda topic: ctx.authorize(Op.DESCRIBE, Res.TOPIC, topic)


def undescribable_topics(ctx, groups, Response) -> None:
    """Kafka's rule for the group describes: a group whose members' assignments hold a topic the
    principal may not describe is answered TOPIC_AUTHORIZATION_FAILED, without its members."""
    names = {
        tp.topic_name
        for g in groups
        for m in g.members
        for a in (m.assignment, getattr(m, "target_assignment", None))
        if a is not None
        for tp in a.topic_partitions
    }
    described = ctx.authorized(Op.DESCRIBE, Res.TOPIC, names)
    for i, g in enumerate(groups):
        if any(
            tp.topic_name not in described
            for m in g.members
            for a in (m.assignment, getattr(m, "target_assignment", None))
            if a is not None
            for tp in a.topic_partitions
        ):
            groups[i] = Response.DescribedGroup(
                error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                group_id=g.group_id,
                members=[],
                error_message="The group has described topic(s) that the client is not authorized to describe.",
            )


async def consumer_group_heartbeat(ctx, request):
    Response = RESPONSES[68]
    if not ctx.authorize(Op.READ, Res.GROUP, request.group_id):
        return Response(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if request.subscribed_topic_names and len(
        ctx.authorized(Op.DESCRIBE, Res.TOPIC, request.subscribed_topic_names)
    ) < len(set(request.subscribed_topic_names)):  # a subscribed topic it may not describe
        return Response(throttle_time_ms=0, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    coord = ctx.broker.groups
    await coord.ensure_offsets_topic()
    out = await coord.consumer.heartbeat(
        request,
        ctx.version,
        ctx.header.client_id or "",
        "/" + ctx.peer.rsplit(":", 1)[0],
        may_describe=topic_filter(ctx),
    )
    assignment = None
    if "assignment" in out:
        ids, _ = coord.consumer._topic_ids()
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


async def consumer_group_describe(ctx, request):
    Response = RESPONSES[69]
    coord = ctx.broker.groups
    ids, _ = coord.consumer._topic_ids()

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
        g = coord.consumer.groups.get(gid)
        if code or g is None:
            out.append(
                Response.DescribedGroup(
                    error_code=code or ErrorCode.GROUP_ID_NOT_FOUND,
                    error_message=None if code else f"group {gid!r} is not a consumer group",
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
                assignor_name=g.assignor,
                members=[
                    Response.Member(
                        member_id=m.member_id,
                        instance_id=m.instance_id,
                        rack_id=m.rack_id,
                        member_epoch=m.member_epoch,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        subscribed_topic_names=list(m.subscribed_topics),
                        subscribed_topic_regex=m.subscribed_regex,
                        assignment=assignment(m.assigned),
                        target_assignment=assignment(g.target.get(m.member_id, set())),
                        member_type=0 if ctx.version >= 1 else -1,
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


ENTRIES = [
    (68, 0, 1, consumer_group_heartbeat),
    (69, 0, 1, consumer_group_describe),
]
