"""The ACL control manager (Kafka's AclControlManager): CreateAcls and DeleteAcls as Acl and
RemoveAcl records (each ACL with a random id, as Kafka's AccessControlEntryRecord), and
the checks Kafka makes of a new ACL and of a filter.

Pure (see control.py).
"""

from __future__ import annotations

import uuid

from logbroker.common.acl import CLUSTER_NAME, AclOperation, AclPermissionType, PatternType, ResourceType
from logbroker.coord.metadata.control import ControllerResult
from logbroker.coord.metadata.metadata import AclBinding, AclBindingFilter, MetadataImage
from logbroker.coord.metadata.metadata_records import encode_record
from logbroker.protocol import ErrorCode


def _name(enum_type, code: int) -> str:
    try:
        return enum_type(code).name
    except ValueError:
        return f"UNKNOWN ({code})"


def describe_acl(b: AclBinding) -> str:
    """An ACL in words, for logs and messages: `ALLOW User:alice from * READ on TOPIC 'orders' (LITERAL)`."""
    return (
        f"{_name(AclPermissionType, b.permission_type)} {b.principal} from {b.host} "
        f"{_name(AclOperation, b.operation)} on {_name(ResourceType, b.resource_type)} {b.resource_name!r} "
        f"({_name(PatternType, b.pattern_type)})"
    )


def acl_error(b: AclBinding) -> str | None:
    """Why CreateAcls refuses this ACL (Kafka's AclControlManager.validateNewAcl and AclApis),
    or None. The message names the field."""
    what = f"ACL {describe_acl(b)}"
    if b.resource_type not in ResourceType._value2member_map_ or b.resource_type in (
        ResourceType.ANY,
        ResourceType.UNKNOWN,
    ):
        return (
            f"{what}: invalid resource type {_name(ResourceType, b.resource_type)}; an ACL is on one of "
            "TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN, USER"
        )
    if b.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"{what}: invalid pattern type {_name(PatternType, b.pattern_type)}; an ACL is LITERAL or PREFIXED"
    if b.operation not in AclOperation._value2member_map_ or b.operation in (AclOperation.ANY, AclOperation.UNKNOWN):
        return f"{what}: invalid operation {_name(AclOperation, b.operation)}; ANY and UNKNOWN only filter"
    if b.permission_type not in (AclPermissionType.DENY, AclPermissionType.ALLOW):
        return f"{what}: invalid permission type {_name(AclPermissionType, b.permission_type)}; an ACL is DENY or ALLOW"
    if not b.resource_name:
        return f"{what}: the resource name is empty"
    if b.resource_type == ResourceType.CLUSTER and b.resource_name != CLUSTER_NAME:
        return f"{what}: the only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    kind, sep, name = b.principal.partition(":")
    if not (kind and sep and name):
        return f"{what}: invalid principal {b.principal!r}; a principal is Type:name, e.g. User:alice or User:*"
    if not b.host:
        return f"{what}: the host is empty; give an address or * for every host"
    return None


def acl_filter_error(f: AclBindingFilter) -> str | None:
    """Why a DescribeAcls/DeleteAcls filter is refused (an UNKNOWN field, as Kafka), or None."""
    for value, enum_type, what in (
        (f.resource_type, ResourceType, "resource type"),
        (f.pattern_type, PatternType, "pattern type"),
        (f.operation, AclOperation, "operation"),
        (f.permission_type, AclPermissionType, "permission type"),
    ):
        if value not in enum_type._value2member_map_ or value == 0:
            return f"ACL filter with an unknown {what} ({value})"
    return None


def _acl_order(item: tuple[AclBinding, str]) -> tuple:
    b = item[0]
    return (b.resource_type, b.resource_name, b.pattern_type, b.principal, b.host, b.operation, b.permission_type)


class AclControlManager:
    def create(
        self, image: MetadataImage, bindings: list[AclBinding]
    ) -> ControllerResult[list[tuple[ErrorCode, str | None]]]:
        """CreateAcls: (error, message) for each binding, in order. A binding `acl_error`
        refuses is INVALID_REQUEST; one that exists already (the same seven fields) succeeds
        without a change, as in Kafka; the new ones get a random id and are written
        together."""
        results: list[tuple[ErrorCode, str | None]] = []
        existing = set(image.acls.values())
        records, lines = [], []
        for b in bindings:
            error = acl_error(b)
            if error is not None:
                results.append((ErrorCode.INVALID_REQUEST, error))
                continue
            if b not in existing:
                existing.add(b)
                acl_id = uuid.uuid4().hex
                while acl_id in image.acls:
                    acl_id = uuid.uuid4().hex
                records.append(encode_record("Acl", id=acl_id, **b.to_json()))
                lines.append((f"ACL {acl_id} created: {describe_acl(b)}", {}))
            results.append((ErrorCode.NONE, None))
        return ControllerResult(records, results, lines)

    def delete(
        self, image: MetadataImage, filters: list[AclBindingFilter]
    ) -> ControllerResult[list[tuple[ErrorCode, str | None, list[AclBinding]]]]:
        """DeleteAcls: for each filter, (error, message, the ACLs it matched and deleted).
        A filter with an UNKNOWN field is INVALID_REQUEST (Kafka's "Unknown patternFilter." /
        "Unknown entryFilter."); an ACL several filters match is reported by each; the
        deletions are written together."""
        results: list[tuple[ErrorCode, str | None, list[AclBinding]]] = []
        gone: dict[str, AclBinding] = {}
        for f in filters:
            error = acl_filter_error(f)
            if error is not None:
                results.append((ErrorCode.INVALID_REQUEST, error, []))
                continue
            matched = sorted(((b, i) for i, b in image.acls.items() if f.matches(b)), key=_acl_order)
            gone.update((i, b) for b, i in matched)
            results.append((ErrorCode.NONE, None, [b for b, _i in matched]))
        return ControllerResult(
            [encode_record("RemoveAcl", id=i) for i in sorted(gone)],
            results,
            [(f"ACL {i} deleted: {describe_acl(b)}", {}) for i, b in sorted(gone.items())],
        )
