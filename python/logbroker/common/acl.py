"""Kafka's ACL vocabulary, shared by the control plane (ACLs in the metadata log,
coord/metadata/acl_control.py), the broker (broker/authorizer.py, the handlers) and the client: the
resource types, operations, pattern and permission types with Kafka's codes, the cluster
resource's name and the authorizer class names. The decisions themselves are made in Rust
(rust/src/server/authorizer.rs)."""

from __future__ import annotations

import enum

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
# ZooKeeper-era name some configurations still carry: the same rules.
LEGACY_AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
CLUSTER_NAME = "kafka-cluster"
ANONYMOUS = "User:ANONYMOUS"


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclPermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


def host_of(peer: str) -> str:
    """The host part of "ip:port" (IPv6 "[::1]:port" too)."""
    host = peer.rsplit(":", 1)[0] if ":" in peer else peer
    return host.strip("[]")
