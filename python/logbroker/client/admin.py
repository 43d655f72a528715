"""`Admin`: the sync Kafka admin client (topics, partitions, configs, groups, offsets,
cluster, SCRAM credentials, ACLs, client quotas). Each call blocks until the broker answered (or `timeout`
seconds passed) and raises the named exception of the first error code.

    with Admin(bootstrap_servers="127.0.0.1:9092") as admin:
        admin.create_topics([NewTopic("events", num_partitions=3)])
        print(admin.describe_topics(["events"]))
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from logbroker.client import config as _config
from logbroker.client.admin_core import (
    OFFSET_SPECS,
    AclBinding,
    AclBindingFilter,
    AdminCore,
    ClusterInfo,
    GroupDescription,
    NewTopic,
    TopicDescription,
)
from logbroker.client.driver import ThreadDriver
from logbroker.client.errors import ClientClosedError
from logbroker.client.group import TopicPartition
from logbroker.client.network import Pending

__all__ = ["AclBinding", "AclBindingFilter", "Admin", "NewTopic"]

T = TypeVar("T")

# The default filter of describe_acls: matches every ACL (AclBindingFilter is frozen).
_ALL_ACLS = AclBindingFilter()


def offset_specs(specs: dict[Any, str | int]) -> dict[TopicPartition, int]:
    out = {}
    for tp, s in specs.items():
        out[TopicPartition(*tp)] = OFFSET_SPECS[s] if isinstance(s, str) else int(s)
    return out


def new_topics(topics: Iterable[NewTopic | str]) -> list[NewTopic]:
    return [NewTopic(t) if isinstance(t, str) else t for t in topics]


class Admin:
    """A Kafka admin client (see the module docstring)."""

    def __init__(self, bootstrap_servers: str | list[str] = "127.0.0.1:9092", **config: Any) -> None:
        self.config = _config.build(_config.ADMIN, {"bootstrap.servers": bootstrap_servers, **config})
        self._core = AdminCore(self.config)
        self._driver = ThreadDriver(self._core, "logbroker-admin")
        self._timeout = self.config["request.timeout.ms"] / 1000
        self._closed = False

    def _call(self, fn: Callable[[], Pending[T]], what: str, timeout: float | None) -> T:
        if self._closed:
            raise ClientClosedError("the admin client is closed")
        result: T = self._driver.call_wait(fn, self._timeout if timeout is None else timeout, what)
        return result

    def create_topics(
        self, topics: Iterable[NewTopic | str], timeout: float | None = None, validate_only: bool = False
    ) -> None:
        """Creates topics (names get the broker's default partition count and replication factor);
        raises on any topic's error, after waiting up to `timeout` seconds."""
        ts = new_topics(topics)
        ms = int((self._timeout if timeout is None else timeout) * 1000)
        self._call(
            lambda: self._core.create_topics(ts, ms, validate_only), f"create_topics {[t.name for t in ts]}", timeout
        )

    def delete_topics(self, names: Iterable[str], timeout: float | None = None) -> None:
        """Deletes the named topics; raises on any topic's error."""
        ns = list(names)
        ms = int((self._timeout if timeout is None else timeout) * 1000)
        self._call(lambda: self._core.delete_topics(ns, ms), f"delete_topics {ns}", timeout)

    def describe_topics(
        self, names: Iterable[str] | None = None, timeout: float | None = None
    ) -> dict[str, TopicDescription]:
        """Partitions, leaders, replicas and ISR of the named topics (all topics when None), by name."""
        ns = None if names is None else list(names)
        return self._call(lambda: self._core.describe_topics(ns), "describe_topics", timeout)

    def list_topics(self, timeout: float | None = None) -> list[str]:
        """The names of all topics, sorted."""
        return sorted(self.describe_topics(None, timeout))

    def create_partitions(
        self, counts: dict[str, int], timeout: float | None = None, validate_only: bool = False
    ) -> None:
        """Grows each topic to the given total partition count."""
        ms = int((self._timeout if timeout is None else timeout) * 1000)
        self._call(lambda: self._core.create_partitions(dict(counts), ms, validate_only), "create_partitions", timeout)

    def describe_configs(
        self, resources: Iterable[tuple[str, str]], timeout: float | None = None
    ) -> dict[tuple[str, str], dict[str, str | None]]:
        """{("topic", name) or ("broker", id): {key: value}}."""
        rs = list(resources)
        return self._call(lambda: self._core.describe_configs(rs), "describe_configs", timeout)

    def alter_configs(
        self,
        changes: dict[tuple[str, str], dict[str, str | None]],
        timeout: float | None = None,
        validate_only: bool = False,
    ) -> None:
        """Incremental: sets each key, or deletes it (back to the default) when the value is None."""
        self._call(lambda: self._core.alter_configs(changes, validate_only), "alter_configs", timeout)

    def list_groups(self, timeout: float | None = None) -> list[tuple[str, str, str]]:
        """[(group_id, protocol_type, state)] from every broker."""
        return self._call(self._core.list_groups, "list_groups", timeout)

    def describe_groups(self, group_ids: Iterable[str], timeout: float | None = None) -> dict[str, GroupDescription]:
        """State, protocol and members of each named consumer group, by group id."""
        gs = list(group_ids)
        return self._call(lambda: self._core.describe_groups(gs), f"describe_groups {gs}", timeout)

    def delete_groups(self, group_ids: Iterable[str], timeout: float | None = None) -> None:
        """Deletes the named (empty) consumer groups; raises on any group's error."""
        gs = list(group_ids)
        self._call(lambda: self._core.delete_groups(gs), f"delete_groups {gs}", timeout)

    def list_offsets(
        self, specs: dict[Any, str | int], timeout: float | None = None
    ) -> dict[TopicPartition, tuple[int, int]]:
        """{(topic, partition): "earliest" | "latest" | "max_timestamp" | "earliest_local" |
        "latest_tiered" (tiered storage, KIP-1005) | timestamp_ms} ->
        {TopicPartition: (offset, timestamp)}."""
        s = offset_specs(specs)
        return self._call(lambda: self._core.list_offsets(s), "list_offsets", timeout)

    def describe_cluster(self, timeout: float | None = None) -> ClusterInfo:
        """The cluster id, controller and brokers."""
        return self._call(self._core.describe_cluster, "describe_cluster", timeout)

    def list_group_offsets(
        self, group_id: str, timeout: float | None = None
    ) -> dict[TopicPartition, tuple[int, str | None]]:
        """Every committed offset of the group: {TopicPartition: (offset, metadata)}."""
        return self._call(lambda: self._core.list_group_offsets(group_id), f"list_group_offsets {group_id!r}", timeout)

    def alter_group_offsets(self, group_id: str, offsets: dict[Any, int], timeout: float | None = None) -> None:
        """Sets the group's committed offsets ({(topic, partition): offset}); refused
        (UNKNOWN_MEMBER_ID) while the group has members, as by Kafka."""
        os = {TopicPartition(*tp): int(o) for tp, o in offsets.items()}
        self._call(lambda: self._core.alter_group_offsets(group_id, os), f"alter_group_offsets {group_id!r}", timeout)

    def delete_group_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition | tuple[str, int]], timeout: float | None = None
    ) -> None:
        """Deletes the group's committed offsets of `partitions` (OffsetDelete); raises on the
        group's error or any partition's (e.g. GROUP_SUBSCRIBED_TO_TOPIC while the group's
        members subscribe to the topic, as by Kafka)."""
        tps = [TopicPartition(*tp) for tp in partitions]
        self._call(
            lambda: self._core.delete_group_offsets(group_id, tps), f"delete_group_offsets {group_id!r}", timeout
        )

    def describe_log_dirs(self, broker: int, timeout: float | None = None) -> dict[TopicPartition, int]:
        """The size in bytes of each replica on `broker` (node id)."""
        return self._call(lambda: self._core.describe_log_dirs(broker), f"describe_log_dirs {broker}", timeout)

    def describe_replica_log_dirs(
        self, broker: int, timeout: float | None = None
    ) -> dict[TopicPartition, tuple[str, str | None]]:
        """Where each replica on `broker` is: {partition: (log directory, the log directory
        it is being moved to, or None)}."""
        return self._call(
            lambda: self._core.describe_replica_log_dirs(broker), f"describe_replica_log_dirs {broker}", timeout
        )

    def alter_replica_log_dirs(
        self, broker: int, moves: dict[TopicPartition | tuple[str, int], str], timeout: float | None = None
    ) -> None:
        """Move replicas on `broker` to other log directories of it (`log.dirs`) while they
        serve; `describe_replica_log_dirs` shows when each has arrived."""
        tps = {TopicPartition(*tp): path for tp, path in moves.items()}
        self._call(lambda: self._core.alter_replica_log_dirs(broker, tps), f"alter_replica_log_dirs {broker}", timeout)

    def describe_user_scram_credentials(
        self, users: Iterable[str] | None = None, timeout: float | None = None
    ) -> dict[str, list[tuple[str, int]]]:
        """{user: [(mechanism, iterations)]} of the named users (None: every user with a
        SCRAM credential); a named user without one raises ResourceNotFoundError."""
        us = None if users is None else list(users)
        return self._call(
            lambda: self._core.describe_user_scram_credentials(us), "describe_user_scram_credentials", timeout
        )

    def alter_user_scram_credentials(
        self,
        upsertions: Iterable[tuple[str, str, str | bytes, int]] = (),
        deletions: Iterable[tuple[str, str]] = (),
        timeout: float | None = None,
    ) -> None:
        """Sets [(user, mechanism, password, iterations)] and deletes [(user, mechanism)]
        SCRAM credentials (mechanism "SCRAM-SHA-256" or "SCRAM-SHA-512"); the password is
        salted here with a random salt, as Kafka's Admin does. Each user at most once per call
        (DuplicateResourceError otherwise, as in Kafka)."""
        ups, dels = list(upsertions), list(deletions)
        users = sorted({u[0] for u in ups} | {d[0] for d in dels})
        self._call(
            lambda: self._core.alter_user_scram_credentials(ups, dels), f"alter_user_scram_credentials {users}", timeout
        )

    def create_acls(self, acls: Iterable[AclBinding], timeout: float | None = None) -> None:
        """Creates ACLs, e.g. AclBinding("topic", "orders", "literal", "User:alice", "*", "read",
        "allow"); one that exists already is left alone. A refused ACL raises its error
        (InvalidRequestError naming the field; SecurityDisabledError when the broker has no
        authorizer; ClusterAuthorizationFailedError without ALTER on the cluster)."""
        acls = list(acls)
        self._call(lambda: self._core.create_acls(acls), f"create_acls ({len(acls)})", timeout)

    def describe_acls(self, acl_filter: AclBindingFilter = _ALL_ACLS, timeout: float | None = None) -> list[AclBinding]:
        """The ACLs the filter matches (default: every ACL), grouped by resource."""
        return self._call(lambda: self._core.describe_acls(acl_filter), "describe_acls", timeout)

    def delete_acls(self, filters: Iterable[AclBindingFilter], timeout: float | None = None) -> list[list[AclBinding]]:
        """Deletes the ACLs each filter matches; returns the ACLs deleted, per filter."""
        fs = list(filters)
        return self._call(lambda: self._core.delete_acls(fs), f"delete_acls ({len(fs)} filter(s))", timeout)

    def describe_client_quotas(
        self, components: Iterable[tuple[str, str, str | None]] = (), strict: bool = False, timeout: float | None = None
    ) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
        """{entity: {key: value}} of the client quotas matching every component (none: all
        quotas). An entity is a sorted tuple of (type, name) pairs, name None for the default:
        (("client-id", "app"), ("user", "alice")). A component is (entity type ("user" or
        "client-id"), "exact" | "default" | "any", name for "exact"); `strict` leaves out
        entities with components the filter does not name."""
        comps = list(components)
        return self._call(lambda: self._core.describe_client_quotas(comps, strict), "describe_client_quotas", timeout)

    def alter_client_quotas(
        self,
        alterations: Iterable[tuple[dict[str, str | None], dict[str, float | None]]],
        validate_only: bool = False,
        timeout: float | None = None,
    ) -> None:
        """Sets or removes client quotas: [(entity, {key: value, or None to remove})], an
        entity {"user": "alice", "client-id": None} (None: the default). Keys:
        producer_byte_rate, consumer_byte_rate (bytes per second). A refused entity raises
        its error (InvalidRequestError naming the entity and key), after the others were
        applied."""
        alts = [(dict(e), dict(ops)) for e, ops in alterations]
        self._call(
            lambda: self._core.alter_client_quotas(alts, validate_only), f"alter_client_quotas ({len(alts)})", timeout
        )

    def close(self) -> None:
        """Closes the client's connections and stops its I/O thread (idempotent)."""
        if not self._closed:
            self._closed = True
            self._driver.stop(5.0)

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
