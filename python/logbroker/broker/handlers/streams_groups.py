"""KIP-1071 streams-group APIs: StreamsGroupHeartbeat (88), StreamsGroupDescribe (89). The
logic is in coord/groups/streams_group.py (the groups kept in __consumer_offsets); served (and
advertised) while the feature streams.version is at least 1, as Kafka 4.2+ (finalized 1 on a new
cluster; `kafka-features downgrade --feature streams.version=0` stops them).

The heartbeat also creates the internal topics the group's topology needs (repartition and
changelog topics, with the partitions and configs the configured topology gives them) through
the controller, as Kafka's coordinator asks its auto-topic-creation manager to; members are told
MISSING_INTERNAL_TOPICS until they exist.

Authorization as Kafka's: the heartbeat needs READ on the group, a joining member DESCRIBE on
every topic its topology names (else TOPIC_AUTHORIZATION_FAILED), and the internal topics are
created only for a principal with CREATE on the cluster or on the topic (else the status says
so); the describe needs DESCRIBE on the group."""

from __future__ import annotations

import logging

from logbroker.broker.handlers.consumer_groups import partitions_by_topic
from logbroker.common.acl import CLUSTER_NAME
from logbroker.common.acl import AclOperation as Op
from logbroker.common.acl import ResourceType as Res
from logbroker.coord.metadata.control import ControllerError
from logbroker.coord.metadata.replication_control import NewTopicSpec
from logbroker.log_format import fields
from logbroker.protocol import RESPONSES, ErrorCode

log = logging.getLogger("logbroker.groups")

HEARTBEAT, DESCRIBE = 88, 89
# The most a member may lag a task's changelog to be given it as active (Kafka Streams'
# acceptable.recovery.lag default), for v0 clients; v1's AcceptableRecoveryLag is -1: this broker
# has no such group config, and the client uses its own.
ACCEPTABLE_RECOVERY_LAG = 10_000
TASK_OFFSET_INTERVAL_MS = 60_000


def _task_ids(cls, tasks) -> list:
    """(subtopology, partition) tasks as the messages' TaskIds, subtopologies and partitions sorted."""
    return [cls(subtopology_id=sid, partitions=ps) for sid, ps in partitions_by_topic(tasks).items()]


def _topology_topics(topology) -> set[str]:
    out: set[str] = set()
    for s in topology.subtopologies or ():
        out.update(s.source_topics or ())
        out.update(s.repartition_sink_topics or ())
        out.update(t.name for t in s.state_changelog_topics or ())
        out.update(t.name for t in s.repartition_source_topics or ())
    return out


async def _create_internal_topics(ctx, group_id: str, wanted: dict) -> list[str]:
    """Asks the controller for the internal topics; what went wrong, per topic."""
    may_create = ctx.authorize(Op.CREATE, Res.CLUSTER, CLUSTER_NAME, audit=False)
    specs, problems = [], []
    for name, info in sorted(wanted.items()):
        if not (may_create or ctx.authorize(Op.CREATE, Res.TOPIC, name)):
            problems.append(f"{name}: the principal may not create it")
            continue
        specs.append(
            NewTopicSpec(
                name=name,
                num_partitions=info.partitions if info.partitions > 0 else -1,
                replication_factor=info.replication_factor if info.replication_factor > 0 else -1,
                configs=dict(info.configs),
            )
        )
    if not specs:
        return problems
    try:
        results = await ctx.controller.create_topics(specs)
    except ControllerError as e:
        return [*problems, f"creating {', '.join(s.name for s in specs)}: {e.message}"]
    for spec, r in zip(specs, results):
        if isinstance(r, ControllerError):
            if r.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                problems.append(f"{spec.name}: {r.message}")
        else:
            log.info(
                "streams group %s: internal topic %s created (%d partitions)",
                group_id,
                spec.name,
                len(r.partitions),
                extra=fields(group=group_id, topic=spec.name),
            )
            ctx.audit_change("create_topic", "TOPIC", spec.name, partitions=len(r.partitions), streams_group=group_id)
    return problems


async def streams_group_heartbeat(ctx, request):
    Response = RESPONSES[HEARTBEAT]
    if not ctx.authorize(Op.READ, Res.GROUP, request.group_id):
        return Response(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if request.topology is not None:
        named = _topology_topics(request.topology)
        if len(ctx.authorized(Op.DESCRIBE, Res.TOPIC, named)) < len(named):
            return Response(throttle_time_ms=0, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    coord = ctx.broker.groups
    await coord.ensure_offsets_topic()
    out = await coord.streams.heartbeat(
        request, ctx.version, ctx.header.client_id or "", "/" + ctx.peer.rsplit(":", 1)[0]
    )
    status = list(out.get("status", ()))
    if out.get("create"):
        problems = await _create_internal_topics(ctx, request.group_id, out["create"])
        if problems:
            status.append((3, "Internal topics could not be created: " + "; ".join(problems)))
    tasks = out.get("assignment")
    return Response(
        throttle_time_ms=0,
        error_code=out["error"],
        error_message=out.get("message"),
        member_id=out.get("member_id", request.member_id),
        member_epoch=out.get("member_epoch", -1),
        heartbeat_interval_ms=out.get("heartbeat_interval_ms", 0),
        acceptable_recovery_lag_legacy=ACCEPTABLE_RECOVERY_LAG if ctx.version == 0 else 0,
        acceptable_recovery_lag=-1,
        task_offset_interval_ms=TASK_OFFSET_INTERVAL_MS,
        status=[Response.Status(status_code=c, status_detail=d) for c, d in status] if status else None,
        active_tasks=None if tasks is None else _task_ids(Response.TaskIds, tasks.active),
        standby_tasks=None if tasks is None else _task_ids(Response.TaskIds, tasks.standby),
        warmup_tasks=None if tasks is None else _task_ids(Response.TaskIds, tasks.warmup),
        endpoint_information_epoch=out.get("endpoint_epoch", 0),
    )


async def streams_group_describe(ctx, request):
    Response = RESPONSES[DESCRIBE]
    coord = ctx.broker.groups
    out = []
    for gid in request.group_ids:
        if not ctx.authorize(Op.DESCRIBE, Res.GROUP, gid):
            out.append(
                Response.DescribedGroup(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, group_id=gid, members=[])
            )
            continue
        code = coord.check_coordinator(gid)
        g = coord.streams.groups.get(gid)
        if code or g is None:
            out.append(
                Response.DescribedGroup(
                    error_code=code or ErrorCode.GROUP_ID_NOT_FOUND,
                    error_message=None if code else f"Group {gid} not found.",
                    group_id=gid,
                    group_state="Dead" if not code else "",
                    group_epoch=-1,
                    assignment_epoch=-1,
                    members=[],
                )
            )
            continue
        out.append(_described(Response, g, request))
    return Response(throttle_time_ms=0, groups=out)


def _described(Response, g, request):
    def assignment(t) -> object:
        return Response.Assignment(
            active_tasks=_task_ids(Response.TaskIds, t.active),
            standby_tasks=_task_ids(Response.TaskIds, t.standby),
            warmup_tasks=_task_ids(Response.TaskIds, t.warmup),
        )

    def topic_info(t) -> object:
        return Response.TopicInfo(
            name=t.name,
            partitions=t.partitions,
            replication_factor=t.replication_factor,
            topic_configs=[Response.KeyValue(key=k, value=v) for k, v in sorted(t.configs.items())],
        )

    topology = None
    if g.topology is not None:
        topology = Response.Topology(
            epoch=g.topology.epoch,
            subtopologies=[
                Response.Subtopology(
                    subtopology_id=s.subtopology_id,
                    source_topics=list(s.source_topics),
                    repartition_sink_topics=list(s.repartition_sink_topics),
                    state_changelog_topics=[topic_info(t) for t in s.state_changelog_topics],
                    repartition_source_topics=[topic_info(t) for t in s.repartition_source_topics],
                )
                for s in g.topology.subtopologies
            ],
        )
    members = []
    for mid, m in sorted(g.members.items()):
        members.append(
            Response.Member(
                member_id=mid,
                member_epoch=m.member_epoch,
                instance_id=m.instance_id,
                rack_id=m.rack_id,
                client_id=m.client_id,
                client_host=m.client_host,
                topology_epoch=m.topology_epoch,
                process_id=m.process_id,
                user_endpoint=None
                if m.user_endpoint is None
                else Response.Endpoint(host=m.user_endpoint[0], port=m.user_endpoint[1]),
                client_tags=[Response.KeyValue(key=k, value=v) for k, v in sorted(m.client_tags.items())],
                task_offsets=[],
                task_end_offsets=[],
                assignment=assignment(m.assigned),
                target_assignment=assignment(g.target.get(mid, m.assigned)),
                is_classic=False,
            )
        )
    return Response.DescribedGroup(
        error_code=ErrorCode.NONE,
        group_id=g.group_id,
        group_state=g.state,
        group_epoch=g.group_epoch,
        assignment_epoch=g.assignment_epoch,
        topology=topology,
        members=members,
        # v1 (KIP-1331): no topology description is stored (the heartbeat never asks for one)
        topology_description_status=1 if request.include_topology_description else 0,
        assignor_name="sticky",
    )


ENTRIES = [
    (HEARTBEAT, 0, 1, streams_group_heartbeat),
    (DESCRIBE, 0, 1, streams_group_describe),
]
