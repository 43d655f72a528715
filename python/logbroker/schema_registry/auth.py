"""Who a registry request comes from, and what it may do.

Authentication (`schema.registry.authentication.method`, Confluent's `authentication.method`):
NONE (every request is User:ANONYMOUS) or BASIC (HTTP Basic: a user of the broker, its
password checked against the broker's SCRAM credentials, any mechanism, or the PLAIN users of
the broker's listeners' JAAS configs). A missing or wrong password answers 401 with
`WWW-Authenticate: Basic`, Confluent's error 40101, never saying which of the two was wrong.

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

import base64
import binascii
import hmac
from collections.abc import Callable

from logbroker import scram
from logbroker.common.acl import CLUSTER_NAME, AclOperation as Op, ResourceType as Res
from logbroker.common.sasl_scram import ScramCredential

ANONYMOUS = "User:ANONYMOUS"
METHODS = ("NONE", "BASIC")
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


class Unauthenticated(Exception):
    """No user, or a wrong password (the message never says which)."""


def resource_of(subject: str | None) -> tuple[int, str]:
    """The ACL resource a subject is checked against."""
    if subject is not None:
        for suffix in ("-value", "-key"):
            if subject.endswith(suffix) and len(subject) > len(suffix):
                return Res.TOPIC, subject[: -len(suffix)]
    return Res.CLUSTER, CLUSTER_NAME


class RegistryAuth:
    def __init__(self, method: str, plain_users: Callable[[], dict[str, str]],
                 scram_credential: Callable[[str, str], ScramCredential | None],
                 authorize: Callable[[str, str, int, str, int], bool] | None) -> None:
        """`authorize(principal, peer, resource type, name, operation)`, None when the broker
        has no authorizer (everything is allowed)."""
        self.method = method
        self._plain_users = plain_users
        self._scram_credential = scram_credential
        self._authorize = authorize

    def principal(self, headers: dict[str, str]) -> str:
        if self.method == "NONE":
            return ANONYMOUS
        auth = headers.get("authorization", "")
        scheme, _, token = auth.partition(" ")
        if scheme.lower() != "basic" or not token:
            raise Unauthenticated("Unauthorized: HTTP Basic authentication is required")
        try:
            user, sep, password = base64.b64decode(token.strip(), validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            raise Unauthenticated("Unauthorized: the Authorization header is not Basic base64(user:password)") from None
        if not sep or not self._password_ok(user, password):
            raise Unauthenticated("Unauthorized")
        return f"User:{user}"

    def _password_ok(self, user: str, password: str) -> bool:
        plain = self._plain_users().get(user)
        if plain is not None and hmac.compare_digest(plain.encode(), password.encode()):
            return True
        for mechanism in SCRAM_MECHANISMS:
            cred = self._scram_credential(user, mechanism)
            if cred is None:
                continue
            salted = scram.salted_password(mechanism, password.encode(), cred.salt, cred.iterations)
            if hmac.compare_digest(scram.stored_key(mechanism, salted), cred.stored_key):
                return True
        return False

    def may(self, principal: str, peer: str, operation: int, subject: str | None) -> bool:
        if self._authorize is None:
            return True
        resource_type, name = resource_of(subject)
        return self._authorize(principal, peer, resource_type, name, operation)

    def may_read(self, principal: str, peer: str, subject: str) -> bool:
        return self.may(principal, peer, Op.DESCRIBE, subject)
