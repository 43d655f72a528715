"""DescribeAcls (29), CreateAcls (30) and DeleteAcls (31): the ACLs kept in the metadata log
(coord/metadata/metadata.py `AclBinding`, enforced by broker/authorizer.py).

Without an authorizer (`authorizer.class.name` empty) every one answers SECURITY_DISABLED,
as Kafka. With one, DescribeAcls needs DESCRIBE on the CLUSTER and the other two ALTER on
it, else CLUSTER_AUTHORIZATION_FAILED (for every ACL or filter of the request).

Describe answers from this broker's image with Kafka's filter semantics
(`AclBindingFilter`), grouped by resource pattern; a filter with an UNKNOWN field is a
top-level INVALID_REQUEST. Create and Delete go to the active controller
(`Controller.create_acls` / `delete_acls`, which validate as Kafka's AclControlManager) and
answer once per ACL / filter, in order.
"""

from __future__ import annotations

import logging

from logbroker.common.acl import CLUSTER_NAME, AclOperation, AclPermissionType, PatternType, ResourceType
from logbroker.coord.metadata.acl_control import acl_filter_error
from logbroker.coord.metadata.control import ControllerError
from logbroker.coord.metadata.metadata import AclBinding, AclBindingFilter
from logbroker.log_format import fields
from logbroker.protocol import RESPONSES, ErrorCode

log = logging.getLogger("logbroker.admin")

DescribeResponse = RESPONSES[29]
CreateResponse = RESPONSES[30]
DeleteResponse = RESPONSES[31]

# Kafka's messages (its AclApis): Describe's differs from the other two
DESCRIBE_DISABLED = "No Authorizer is configured on the broker"
ALTER_DISABLED = "No Authorizer is configured."


def _refusal(ctx, operation: AclOperation) -> tuple[ErrorCode, str] | None:
    """SECURITY_DISABLED without an authorizer; CLUSTER_AUTHORIZATION_FAILED when the
    principal lacks `operation` on the cluster (a request forwarded to the controller
    listener was checked by the broker that forwarded it: `ctx.authorize` allows it); None
    when the request may go on."""
    if ctx.broker.config.get_str("authorizer.class.name") == "":
        return ErrorCode.SECURITY_DISABLED, DESCRIBE_DISABLED if operation == AclOperation.DESCRIBE else ALTER_DISABLED
    if not ctx.authorize(operation, ResourceType.CLUSTER, CLUSTER_NAME):
        return (
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            f"principal {ctx.principal} is not authorized to {operation.name} the cluster "
            f"({'describe' if operation == AclOperation.DESCRIBE else 'change'} ACLs)",
        )
    return None


def _filter(
    resource_type: int,
    name: str | None,
    pattern_type: int,
    principal: str | None,
    host: str | None,
    operation: int,
    permission_type: int,
) -> AclBindingFilter:
    return AclBindingFilter(resource_type, name, pattern_type, principal, host, operation, permission_type)


def _type_name(code: int) -> str:
    return ResourceType(code).name if code in ResourceType._value2member_map_ else str(code)


def _shown(b: AclBinding | AclBindingFilter) -> dict:
    """An ACL or filter as the audit log writes it (broker/audit_log.py), with Kafka's names."""

    def name(enum, code: int) -> str:
        return enum(code).name if code in enum._value2member_map_ else str(code)

    return {
        "pattern_type": name(PatternType, b.pattern_type),
        "principal": b.principal,
        "host": b.host,
        "operation": name(AclOperation, b.operation),
        "permission": name(AclPermissionType, b.permission_type),
    }


def _order(b: AclBinding) -> tuple:
    return (b.resource_type, b.resource_name, b.pattern_type, b.principal, b.host, b.operation, b.permission_type)


async def describe(ctx, request):
    refused = _refusal(ctx, AclOperation.DESCRIBE)
    if refused is not None:
        return DescribeResponse(throttle_time_ms=0, error_code=refused[0], error_message=refused[1], resources=[])
    f = _filter(
        request.resource_type_filter,
        request.resource_name_filter,
        request.pattern_type_filter,
        request.principal_filter,
        request.host_filter,
        request.operation,
        request.permission_type,
    )
    error = acl_filter_error(f)
    if error is not None:
        return DescribeResponse(
            throttle_time_ms=0, error_code=ErrorCode.INVALID_REQUEST, error_message=error, resources=[]
        )
    resources: dict[tuple[int, str, int], list[AclBinding]] = {}
    for b in sorted((b for b in ctx.controller.image.acls.values() if f.matches(b)), key=_order):
        resources.setdefault((b.resource_type, b.resource_name, b.pattern_type), []).append(b)
    return DescribeResponse(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        error_message=None,
        resources=[
            DescribeResponse.DescribeAclsResource(
                resource_type=rt,
                resource_name=name,
                pattern_type=pt,
                acls=[
                    DescribeResponse.AclDescription(
                        principal=b.principal, host=b.host, operation=b.operation, permission_type=b.permission_type
                    )
                    for b in acls
                ],
            )
            for (rt, name, pt), acls in resources.items()
        ],
    )


async def create(ctx, request):
    bindings = [
        AclBinding(
            c.resource_type,
            c.resource_name,
            c.resource_pattern_type,
            c.principal,
            c.host,
            c.operation,
            c.permission_type,
        )
        for c in request.creations
    ]
    refused = _refusal(ctx, AclOperation.ALTER)
    if refused is not None:
        results = [refused] * len(bindings)
    else:
        try:
            results = await ctx.controller.create_acls(bindings)
        except ControllerError as e:  # no controller reached: every ACL fails alike
            results = [(e.code, e.message)] * len(bindings)
        for binding, (code, message) in zip(bindings, results):
            ctx.audit_change(
                "create_acl",
                _type_name(binding.resource_type),
                binding.resource_name,
                code,
                message,
                acl=_shown(binding),
            )
            if code != ErrorCode.NONE:
                log.info(
                    "creating an ACL for %s from %s refused (%s): %s",
                    ctx.principal,
                    ctx.peer,
                    ErrorCode(code).name,
                    message,
                    extra=fields(peer=ctx.peer),
                )
    return CreateResponse(
        throttle_time_ms=0,
        results=[CreateResponse.AclCreationResult(error_code=code, error_message=message) for code, message in results],
    )


async def delete(ctx, request):
    filters = [
        _filter(
            f.resource_type_filter,
            f.resource_name_filter,
            f.pattern_type_filter,
            f.principal_filter,
            f.host_filter,
            f.operation,
            f.permission_type,
        )
        for f in request.filters
    ]
    refused = _refusal(ctx, AclOperation.ALTER)
    if refused is not None:
        results = [(refused[0], refused[1], [])] * len(filters)
    else:
        try:
            results = await ctx.controller.delete_acls(filters)
        except ControllerError as e:
            results = [(e.code, e.message, [])] * len(filters)
        for f, (code, message, matched) in zip(filters, results):
            for b in matched if code == ErrorCode.NONE else []:
                ctx.audit_change("delete_acl", _type_name(b.resource_type), b.resource_name, acl=_shown(b))
            if code != ErrorCode.NONE:
                ctx.audit_change(
                    "delete_acl", _type_name(f.resource_type), f.resource_name or "", code, message, filter=_shown(f)
                )
    return DeleteResponse(
        throttle_time_ms=0,
        filter_results=[
            DeleteResponse.DeleteAclsFilterResult(
                error_code=code,
                error_message=message,
                matching_acls=[
                    DeleteResponse.DeleteAclsMatchingAcl(
                        error_code=ErrorCode.NONE,
                        error_message=None,
                        resource_type=b.resource_type,
                        resource_name=b.resource_name,
                        pattern_type=b.pattern_type,
                        principal=b.principal,
                        host=b.host,
                        operation=b.operation,
                        permission_type=b.permission_type,
                    )
                    for b in matched
                ],
            )
            for code, message, matched in results
        ],
    )


ENTRIES = [
    (29, 1, 3, describe),
    (30, 1, 3, create),
    (31, 1, 3, delete),
]
