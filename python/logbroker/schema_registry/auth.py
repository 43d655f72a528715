"""Who a registry request comes from, and what it may do.

Authentication (`schema.registry.authentication.method`, Confluent's `authentication.method`):
NONE or BASIC, the broker's users (broker/http_basic_auth.py). A missing or wrong password
answers 401 with `WWW-Authenticate: Basic`, Confluent's error 40101.

Authorization, when the broker has an authorizer (`authorizer.class.name`): the broker's own
ACLs decide, for the principal and the client's host. A subject named by Confluent's default
strategy (`<topic>-key`, `<topic>-value`) is the TOPIC <topic>; any other subject, and the
global config and mode, the CLUSTER:

    reading a subject, its versions, config, mode; testing compatibility    DESCRIBE
    registering a schema                                                    WRITE
    deleting a subject or a version                                         DELETE
    setting or deleting a subject's (or the global) config or mode          ALTER_CONFIGS

A schema by id may be read by whoever may read one of the subjects that use it; the list of
subjects shows the readable ones only. A refusal is 403, Confluent's error 40301.
"""

from __future__ import annotations

from collections.abc import Callable

from logbroker.broker.http_basic_auth import ANONYMOUS, METHODS, BasicAuth, Unauthenticated
from logbroker.common.acl import CLUSTER_NAME
from logbroker.common.acl import AclOperation as Op
from logbroker.common.acl import ResourceType as Res

__all__ = ["ANONYMOUS", "METHODS", "RegistryAuth", "Unauthenticated", "resource_of"]


def resource_of(subject: str | None) -> tuple[int, str]:
    """The ACL resource a subject is checked against."""
    if subject is not None:
        for suffix in ("-value", "-key"):
            if subject.endswith(suffix) and len(subject) > len(suffix):
                return Res.TOPIC, subject[: -len(suffix)]
    return Res.CLUSTER, CLUSTER_NAME


class RegistryAuth:
    def __init__(self, basic: BasicAuth, authorize: Callable[[str, str, int, str, int], bool] | None) -> None:
        """`authorize(principal, peer, resource type, name, operation)`, None when the broker
        has no authorizer (everything is allowed)."""
        self.basic = basic
        self._authorize = authorize

    def principal(self, headers: dict[str, str], peer: str = "") -> str:
        return self.basic.principal(headers, peer)

    def may(self, principal: str, peer: str, operation: int, subject: str | None) -> bool:
        if self._authorize is None:
            return True
        resource_type, name = resource_of(subject)
        return self._authorize(principal, peer, resource_type, name, operation)

    def may_read(self, principal: str, peer: str, subject: str) -> bool:
        return self.may(principal, peer, Op.DESCRIBE, subject)
