"""DescribeClientQuotas (48) and AlterClientQuotas (49): the client quotas kept in the
metadata log (KIP-13/55, KIP-546; coord/metadata/client_quotas.py has the rules, the Rust network
thread enforces them: rust/src/server/quota.rs).

Describe answers from this broker's metadata image: every entity the filter matches
(components with match type 0 exact name, 1 the default, 2 any name; `strict` leaves out
entities with other components) with its keys and values. A bad filter answers the
request's error (INVALID_REQUEST, or UNSUPPORTED_VERSION for an unknown entity type, as
Kafka) and no entries. Alter goes to the active controller (`Controller.alter_client_quotas`)
and answers once per entry, with the entity as sent. Describe needs DESCRIBE_CONFIGS on the
cluster, Alter ALTER_CONFIGS on it, else CLUSTER_AUTHORIZATION_FAILED, as Kafka.
"""

from __future__ import annotations

import logging

from logbroker.common.acl import CLUSTER_NAME
from logbroker.common.acl import AclOperation as Op
from logbroker.common.acl import ResourceType as Res
from logbroker.coord.metadata import client_quotas
from logbroker.coord.metadata.control import ControllerError
from logbroker.log_format import fields
from logbroker.protocol import RESPONSES, ErrorCode

log = logging.getLogger("logbroker.admin")

DescribeResponse = RESPONSES[48]
AlterResponse = RESPONSES[49]
DENIED = "Cluster authorization failed."


async def describe(ctx, request):
    if not ctx.authorize(Op.DESCRIBE_CONFIGS, Res.CLUSTER, CLUSTER_NAME):
        return DescribeResponse(
            throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message=DENIED, entries=None
        )
    try:
        exact, present = client_quotas.describe_filter(
            [(c.entity_type, c.match_type, c.match) for c in request.components]
        )
    except client_quotas.QuotaError as e:
        log.info(
            "DescribeClientQuotas from %s refused (%s): %s",
            ctx.peer,
            e.code.name,
            e.message,
            extra=fields(peer=ctx.peer),
        )
        return DescribeResponse(throttle_time_ms=0, error_code=e.code, error_message=e.message, entries=None)
    entries = []
    for entity, values in sorted(
        ctx.controller.image.client_quotas.items(), key=lambda kv: client_quotas.entity_name(kv[0])
    ):
        if client_quotas.matches(entity, exact, present, request.strict):
            entries.append(
                DescribeResponse.EntryData(
                    entity=[DescribeResponse.EntityData(entity_type=t, entity_name=n) for t, n in entity],
                    values=[DescribeResponse.ValueData(key=k, value=v) for k, v in sorted(values.items())],
                )
            )
    return DescribeResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, entries=entries)


def _entry(components, code, message):
    return AlterResponse.EntryData(
        error_code=code,
        error_message=message,
        entity=[AlterResponse.EntityData(entity_type=t, entity_name=n) for t, n in components],
    )


async def alter(ctx, request):
    entries = [
        ([(c.entity_type, c.entity_name) for c in e.entity], [(o.key, o.value, o.remove) for o in e.ops])
        for e in request.entries
    ]
    if not ctx.authorize(Op.ALTER_CONFIGS, Res.CLUSTER, CLUSTER_NAME):
        return AlterResponse(
            throttle_time_ms=0,
            entries=[_entry(comps, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, DENIED) for comps, _ops in entries],
        )
    try:
        results = await ctx.controller.alter_client_quotas(entries, request.validate_only)
    except ControllerError as e:  # no controller reached: every entry fails alike
        results = [(comps, e.code, e.message) for comps, _ops in entries]
    ops = {client_quotas.entity_name(comps): ops for comps, ops in entries}
    for comps, code, message in results:
        if not request.validate_only:  # the audit log (broker/audit_log.py)
            name = client_quotas.entity_name(comps)
            ctx.audit_change(
                "alter_client_quotas",
                "CLIENT_QUOTA",
                name,
                code,
                message,
                quotas={k: None if remove else v for k, v, remove in ops.get(name, [])},
            )
        if code != ErrorCode.NONE:
            log.info(
                "altering the client quotas of %s from %s refused (%s): %s",
                client_quotas.entity_name(comps),
                ctx.peer,
                ErrorCode(code).name,
                message,
                extra=fields(peer=ctx.peer),
            )
    return AlterResponse(throttle_time_ms=0, entries=[_entry(comps, code, message) for comps, code, message in results])


ENTRIES = [
    (48, 0, 1, describe),
    (49, 0, 1, alter),
]
