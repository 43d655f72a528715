"""The admin client's sans-I/O core: each operation builds its requests, sends them to the
right broker (the controller for topic changes, the group coordinator for group operations,
partition leaders for offsets, any broker for configs, SCRAM credentials and ACLs) and turns the
responses into plain Python values, raising the named exception of the first error code.
Every method returns a `Pending`.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Any

from logbroker import scram
from logbroker.client.core import ClientCore
from logbroker.client.errors import KafkaConnectionError, error_for
from logbroker.client.group import (
    TopicPartition,
    committed_from_response,
    coordinator_from_response,
    decode_assignment,
    find_coordinator_request,
)
from logbroker.client.network import Pending, Versioned, gather
from logbroker.protocol import ErrorCode
from logbroker.protocol.messages.alter_client_quotas_request import _AlterClientQuotasRequest
from logbroker.protocol.messages.alter_replica_log_dirs_request import _AlterReplicaLogDirsRequest
from logbroker.protocol.messages.alter_user_scram_credentials_request import _AlterUserScramCredentialsRequest
from logbroker.protocol.messages.create_acls_request import _CreateAclsRequest
from logbroker.protocol.messages.create_partitions_request import _CreatePartitionsRequest
from logbroker.protocol.messages.create_topics_request import _CreateTopicsRequest
from logbroker.protocol.messages.delete_acls_request import _DeleteAclsRequest
from logbroker.protocol.messages.delete_groups_request import _DeleteGroupsRequest
from logbroker.protocol.messages.delete_topics_request import _DeleteTopicsRequest
from logbroker.protocol.messages.describe_acls_request import _DescribeAclsRequest
from logbroker.protocol.messages.describe_client_quotas_request import _DescribeClientQuotasRequest
from logbroker.protocol.messages.describe_configs_request import _DescribeConfigsRequest
from logbroker.protocol.messages.describe_groups_request import _DescribeGroupsRequest
from logbroker.protocol.messages.describe_log_dirs_request import _DescribeLogDirsRequest
from logbroker.protocol.messages.describe_user_scram_credentials_request import _DescribeUserScramCredentialsRequest
from logbroker.protocol.messages.incremental_alter_configs_request import _IncrementalAlterConfigsRequest
from logbroker.protocol.messages.list_groups_request import _ListGroupsRequest
from logbroker.protocol.messages.list_offsets_request import _ListOffsetsRequest
from logbroker.protocol.messages.metadata_request import _MetadataRequest
from logbroker.protocol.messages.offset_commit_request import _OffsetCommitRequest
from logbroker.protocol.messages.offset_delete_request import _OffsetDeleteRequest
from logbroker.protocol.messages.offset_fetch_request import _OffsetFetchRequest

__all__ = [
    "AclBinding",
    "AclBindingFilter",
    "AdminCore",
    "BrokerInfo",
    "ClusterInfo",
    "GroupDescription",
    "GroupMember",
    "NewTopic",
    "PartitionInfo",
    "TopicDescription",
]

CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS = 19, 20, 37
DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 44
LIST_GROUPS, DESCRIBE_GROUPS, DELETE_GROUPS, DESCRIBE_CLUSTER, LIST_OFFSETS = 16, 15, 42, 60, 2
RESOURCE_TYPES = {"topic": 2, "broker": 4, "broker_logger": 8, "group": 32}
OFFSET_SPECS = {"earliest": -2, "latest": -1, "max_timestamp": -3, "earliest_local": -4, "latest_tiered": -5}
SCRAM_SALT_BYTES = 32
# ACL fields by name (Kafka's codes); "any" (and "match" for pattern types) only in filters
ACL_RESOURCE_TYPES = {
    "any": 1,
    "topic": 2,
    "group": 3,
    "cluster": 4,
    "transactional_id": 5,
    "delegation_token": 6,
    "user": 7,
}
ACL_PATTERN_TYPES = {"any": 1, "match": 2, "literal": 3, "prefixed": 4}
ACL_OPERATIONS = {
    "any": 1,
    "all": 2,
    "read": 3,
    "write": 4,
    "create": 5,
    "delete": 6,
    "alter": 7,
    "describe": 8,
    "cluster_action": 9,
    "describe_configs": 10,
    "alter_configs": 11,
    "idempotent_write": 12,
    "create_tokens": 13,
    "describe_tokens": 14,
    "two_phase_commit": 15,
}
ACL_PERMISSIONS = {"any": 1, "deny": 2, "allow": 3}


@dataclass(frozen=True)
class NewTopic:
    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    config: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class PartitionInfo:
    partition: int
    leader: int
    replicas: list[int]
    isr: list[int]


@dataclass(frozen=True)
class TopicDescription:
    name: str
    internal: bool
    partitions: list[PartitionInfo]


@dataclass(frozen=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None


@dataclass(frozen=True)
class ClusterInfo:
    cluster_id: str | None
    controller_id: int
    brokers: list[BrokerInfo]


@dataclass(frozen=True)
class GroupMember:
    member_id: str
    client_id: str
    client_host: str
    group_instance_id: str | None
    assignment: list[TopicPartition]


@dataclass(frozen=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[GroupMember]


@dataclass(frozen=True)
class AclBinding:
    """One ACL: a resource pattern and who may (or may not) do what on it, from where. Names
    are Kafka's, in lower case: resource_type "topic", "group", "cluster" (named
    "kafka-cluster"), "transactional_id", "delegation_token", "user"; pattern_type "literal"
    (the name, or "*" for every resource) or "prefixed"; principal "User:alice" ("User:*"
    for everyone); host an address or "*"; operation "read", "write", "create", "delete",
    "alter", "describe", "cluster_action", "describe_configs", "alter_configs",
    "idempotent_write", ... or "all"; permission "allow" or "deny"."""

    resource_type: str
    name: str
    pattern_type: str
    principal: str
    host: str
    operation: str
    permission: str


@dataclass(frozen=True)
class AclBindingFilter:
    """Which ACLs `describe_acls` shows and `delete_acls` deletes (Kafka's AclBindingFilter):
    "any" and None match anything; pattern_type "literal"/"prefixed" match that type with an
    equal name, "any" every type with an equal name, and "match" the ACLs that apply to the
    resource named (literal with its name or "*", prefixed with a prefix of it)."""

    resource_type: str = "any"
    name: str | None = None
    pattern_type: str = "any"
    principal: str | None = None
    host: str | None = None
    operation: str = "any"
    permission: str = "any"


def _acl_code(table: dict[str, int], what: str, name: str) -> int:
    key = str(name).lower().replace("-", "_")
    if key not in table:
        raise ValueError(f"ACL {what} must be one of {sorted(table)}, not {name!r}")
    return table[key]


def _acl_name(table: dict[str, int], code: int) -> str:
    return next((n for n, c in table.items() if c == code), f"unknown({code})")


def _acl_codes(f: AclBinding | AclBindingFilter) -> tuple[int, int, int, int]:
    """(resource type, pattern type, operation, permission) codes; ValueError for an unknown name."""
    return (
        _acl_code(ACL_RESOURCE_TYPES, "resource type", f.resource_type),
        _acl_code(ACL_PATTERN_TYPES, "pattern type", f.pattern_type),
        _acl_code(ACL_OPERATIONS, "operation", f.operation),
        _acl_code(ACL_PERMISSIONS, "permission", f.permission),
    )


def _binding(
    resource_type: int, name: str, pattern_type: int, principal: str, host: str, operation: int, permission: int
) -> AclBinding:
    return AclBinding(
        _acl_name(ACL_RESOURCE_TYPES, resource_type),
        name,
        _acl_name(ACL_PATTERN_TYPES, pattern_type),
        principal,
        host,
        _acl_name(ACL_OPERATIONS, operation),
        _acl_name(ACL_PERMISSIONS, permission),
    )


def _resource(r: tuple[str, str]) -> tuple[int, str]:
    kind, name = r
    if kind not in RESOURCE_TYPES:
        raise ValueError(f"resource type must be one of {sorted(RESOURCE_TYPES)}, not {kind!r}")
    return RESOURCE_TYPES[kind], name


QUOTA_MATCH_TYPES = {"exact": 0, "default": 1, "any": 2}  # DescribeClientQuotas match types


class AdminCore(ClientCore):
    """Admin operations (see the module docstring)."""

    def _controller(self) -> Pending[Any]:
        return self.wait_metadata(
            lambda: self.metadata.version > 0, self.net.request_timeout, "cluster metadata"
        ).chain(lambda _: self.metadata.controller_id if self.metadata.controller_id >= 0 else self.net.any_node())

    def _to_controller(self, body: Any) -> Pending[Any]:
        return self._controller().chain(lambda node: self.net.request(node, body))

    def create_topics(self, topics: list[NewTopic], timeout_ms: int, validate_only: bool) -> Pending[None]:
        cls = _CreateTopicsRequest
        req = cls(
            timeout_ms=timeout_ms,
            validate_only=validate_only,
            topics=[
                cls.CreatableTopic(
                    name=t.name,
                    num_partitions=t.num_partitions,
                    replication_factor=t.replication_factor,
                    configs=[cls.CreatableTopicConfig(name=k, value=str(v)) for k, v in t.config.items()],
                )
                for t in topics
            ],
        )

        def check(resp: Any) -> None:
            for r in resp.topics:
                if r.error_code:
                    raise error_for(r.error_code, r.error_message, f"create topic {r.name!r}")
            self.request_metadata_update()

        return self._to_controller(req).chain(check)

    def delete_topics(self, names: list[str], timeout_ms: int) -> Pending[None]:
        cls = _DeleteTopicsRequest
        req = Versioned(
            DELETE_TOPICS,
            lambda v: (
                cls(timeout_ms=timeout_ms, topic_names=names)
                if v < 6
                else cls(timeout_ms=timeout_ms, topics=[cls.DeleteTopicState(name=n) for n in names])
            ),
        )

        def check(resp: Any) -> None:
            for r in resp.responses:
                if r.error_code:
                    raise error_for(r.error_code, r.error_message, f"delete topic {r.name!r}")
            self.request_metadata_update()

        return self._to_controller(req).chain(check)

    def describe_topics(self, names: list[str] | None) -> Pending[dict[str, TopicDescription]]:
        cls = _MetadataRequest
        topics = None if names is None else [cls.MetadataRequestTopic(name=n) for n in names]
        req = cls(topics=topics, allow_auto_topic_creation=False)

        def parse(resp: Any) -> dict[str, TopicDescription]:
            out = {}
            for t in resp.topics:
                if t.error_code:
                    raise error_for(t.error_code, None, f"describe topic {t.name!r}")
                out[t.name] = TopicDescription(
                    t.name,
                    t.is_internal,
                    [
                        PartitionInfo(p.partition_index, p.leader_id, list(p.replica_nodes), list(p.isr_nodes))
                        for p in sorted(t.partitions, key=lambda p: p.partition_index)
                    ],
                )
            return out

        return self.net.request(self.net.any_node(), req).chain(parse)

    def create_partitions(self, counts: dict[str, int], timeout_ms: int, validate_only: bool) -> Pending[None]:
        cls = _CreatePartitionsRequest
        req = cls(
            timeout_ms=timeout_ms,
            validate_only=validate_only,
            topics=[cls.CreatePartitionsTopic(name=t, count=n, assignments=None) for t, n in counts.items()],
        )

        def check(resp: Any) -> None:
            for r in resp.results:
                if r.error_code:
                    raise error_for(r.error_code, r.error_message, f"create partitions of {r.name!r}")
            self.request_metadata_update()

        return self._to_controller(req).chain(check)

    def describe_configs(
        self, resources: list[tuple[str, str]]
    ) -> Pending[dict[tuple[str, str], dict[str, str | None]]]:
        cls = _DescribeConfigsRequest
        names = {v: k for k, v in RESOURCE_TYPES.items()}
        req = cls(
            resources=[
                cls.DescribeConfigsResource(resource_type=t, resource_name=n, configuration_keys=None)
                for t, n in map(_resource, resources)
            ]
        )

        def parse(resp: Any) -> dict[tuple[str, str], dict[str, str | None]]:
            out = {}
            for r in resp.results:
                if r.error_code:
                    raise error_for(r.error_code, r.error_message, f"describe configs of {r.resource_name!r}")
                out[(names.get(r.resource_type, str(r.resource_type)), r.resource_name)] = {
                    c.name: c.value for c in r.configs
                }
            return out

        return self.net.request(self.net.any_node(), req).chain(parse)

    def alter_configs(
        self, changes: dict[tuple[str, str], dict[str, str | None]], validate_only: bool
    ) -> Pending[None]:
        cls = _IncrementalAlterConfigsRequest
        resources = []
        for r, cfg in changes.items():
            t, n = _resource(r)
            resources.append(
                cls.AlterConfigsResource(
                    resource_type=t,
                    resource_name=n,
                    configs=[
                        cls.AlterableConfig(
                            name=k, config_operation=1 if v is None else 0, value=None if v is None else str(v)
                        )
                        for k, v in cfg.items()
                    ],
                )
            )
        req = cls(resources=resources, validate_only=validate_only)

        def check(resp: Any) -> None:
            for r in resp.responses:
                if r.error_code:
                    raise error_for(r.error_code, r.error_message, f"alter configs of {r.resource_name!r}")

        return self.net.request(self.net.any_node(), req).chain(check)

    def describe_cluster(self) -> Pending[ClusterInfo]:
        def ask(_: Any) -> Any:
            req = _MetadataRequest(topics=[], allow_auto_topic_creation=False)
            return self.net.request(self.net.any_node(), req)

        def parse(resp: Any) -> ClusterInfo:
            return ClusterInfo(
                resp.cluster_id,
                resp.controller_id,
                [BrokerInfo(b.node_id, b.host, b.port, b.rack) for b in resp.brokers],
            )

        return Pending.of(None).chain(ask).chain(parse)

    def _to_broker(self, broker: int, req: Any) -> Pending[Any]:
        """`req` to broker `broker` (its address from the cluster metadata, awaited first)."""
        return self._brokers().chain(lambda _nodes: self.net.request(broker, req))

    def _brokers(self) -> Pending[list[int]]:
        return self.wait_metadata(
            lambda: self.metadata.version > 0, self.net.request_timeout, "cluster metadata"
        ).chain(lambda _: sorted(self.metadata.brokers))

    def list_groups(self) -> Pending[list[tuple[str, str, str]]]:
        def ask(nodes: list[int]) -> Any:
            return gather([self.net.request(n, _ListGroupsRequest()) for n in nodes])

        def parse(resps: list[Any]) -> list[tuple[str, str, str]]:
            out = []
            for r in resps:
                if r.error_code:
                    raise error_for(r.error_code, None, "list groups")
                out += [(g.group_id, g.protocol_type, g.group_state) for g in r.groups]
            return sorted(out)

        return self._brokers().chain(ask).chain(parse)

    def _coordinator(self, group: str) -> Pending[Any]:
        def parse(r: Any) -> Any:
            return coordinator_from_response(self.net, r, "coordinator", f"group {group!r}")

        return self.net.request(self.net.any_node(), find_coordinator_request(group, 0)).chain(parse)

    def describe_groups(self, groups: list[str]) -> Pending[dict[str, GroupDescription]]:
        def one(g: str) -> Pending[Any]:
            return self._coordinator(g).chain(lambda node: self.net.request(node, _DescribeGroupsRequest(groups=[g])))

        def parse(resps: list[Any]) -> dict[str, GroupDescription]:
            out = {}
            for resp in resps:
                for d in resp.groups:
                    if d.error_code:
                        raise error_for(d.error_code, None, f"describe group {d.group_id!r}")
                    members = []
                    for m in d.members:
                        try:
                            assignment = decode_assignment(m.member_assignment) if d.protocol_type == "consumer" else []
                        except Exception:  # noqa: BLE001 - a foreign protocol's bytes
                            assignment = []
                        members.append(
                            GroupMember(m.member_id, m.client_id, m.client_host, m.group_instance_id, assignment)
                        )
                    out[d.group_id] = GroupDescription(
                        d.group_id, d.group_state, d.protocol_type, d.protocol_data, members
                    )
            return out

        return gather([one(g) for g in groups]).chain(parse)

    def delete_groups(self, groups: list[str]) -> Pending[None]:
        def one(g: str) -> Pending[Any]:
            return self._coordinator(g).chain(
                lambda node: self.net.request(node, _DeleteGroupsRequest(groups_names=[g]))
            )

        def check(resps: list[Any]) -> None:
            for resp in resps:
                for r in resp.results:
                    if r.error_code:
                        raise error_for(r.error_code, None, f"delete group {r.group_id!r}")

        return gather([one(g) for g in groups]).chain(check)

    def list_offsets(self, specs: dict[TopicPartition, int]) -> Pending[dict[TopicPartition, tuple[int, int]]]:
        topics = {tp.topic for tp in specs}
        self.want_topics(topics)

        def known() -> bool:
            return all(self.metadata.leader(*tp) >= 0 for tp in specs)

        def ask(_: Any) -> Any:
            cls = _ListOffsetsRequest
            by_leader: dict[int, dict[str, list[Any]]] = {}
            for tp, ts in specs.items():
                by_leader.setdefault(self.metadata.leader(*tp), {}).setdefault(tp.topic, []).append(
                    cls.ListOffsetsPartition(partition_index=tp.partition, timestamp=ts)
                )
            return gather(
                [
                    self.net.request(
                        n,
                        cls(
                            replica_id=-1, topics=[cls.ListOffsetsTopic(name=t, partitions=ps) for t, ps in ts.items()]
                        ),
                    )
                    for n, ts in by_leader.items()
                ]
            )

        deadline = self.now + self.net.request_timeout

        def parse(resps: list[Any]) -> dict[TopicPartition, tuple[int, int]] | Pending[Any]:
            out = {}
            for resp in resps:
                for t in resp.topics:
                    for p in t.partitions:
                        if p.error_code:
                            err = error_for(p.error_code, None, f"list offsets of {t.name}-{p.partition_index}")
                            if getattr(err, "retriable", False) and self.now < deadline:
                                # A leader just elected or moved (NOT_LEADER_OR_FOLLOWER, ...): new
                                # metadata, then ask again, as Kafka's admin client does.
                                self.request_metadata_update()
                                again: Pending[Any] = Pending()
                                self.call_at(
                                    self.now + self.config["retry.backoff.ms"] / 1000,
                                    lambda: attempt().add_callback(again.settle_from),  # noqa: B023 - returned below
                                )
                                return again
                            raise err
                        out[TopicPartition(t.name, p.partition_index)] = (p.offset, p.timestamp)
            return out

        def attempt() -> Pending[Any]:
            remaining = max(0.0, deadline - self.now)
            out: Pending[Any] = Pending()

            def done(p: Pending[Any]) -> None:
                if isinstance(p.error, KafkaConnectionError) and self.now < deadline:
                    # the leader's broker is gone: its partitions get new leaders; ask again
                    self.request_metadata_update()
                    self.call_at(
                        self.now + self.config["retry.backoff.ms"] / 1000,
                        lambda: attempt().add_callback(out.settle_from),
                    )
                else:
                    out.settle_from(p)

            self.wait_metadata(known, remaining, f"leaders of {sorted(topics)}").chain(ask).chain(parse).add_callback(
                done
            )
            return out

        return attempt()

    def list_group_offsets(self, group: str) -> Pending[dict[TopicPartition, tuple[int, str | None]]]:
        """Every committed offset of `group` (OffsetFetch for all topics, at its coordinator):
        {TopicPartition: (offset, metadata)} (Kafka's listConsumerGroupOffsets)."""
        req = _OffsetFetchRequest(group_id=group, topics=None, require_stable=True)

        def parse(resp: Any) -> dict[TopicPartition, tuple[int, str | None]]:
            return {tp: c for tp, c in committed_from_response(resp, group).items() if c[0] >= 0}

        return self._coordinator(group).chain(lambda node: self.net.request(node, req)).chain(parse)

    def alter_group_offsets(self, group: str, offsets: dict[TopicPartition, int]) -> Pending[None]:
        """Commits `offsets` for `group` from outside it (generation -1, no member id), as
        Kafka's alterConsumerGroupOffsets; the coordinator refuses while the group has members."""
        cls = _OffsetCommitRequest
        topics: dict[str, list[Any]] = {}
        for tp, off in sorted(offsets.items()):
            topics.setdefault(tp.topic, []).append(
                cls.OffsetCommitRequestPartition(
                    partition_index=tp.partition, committed_offset=off, committed_metadata=""
                )
            )
        req = cls(
            group_id=group,
            generation_id_or_member_epoch=-1,
            member_id="",
            group_instance_id=None,
            topics=[cls.OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in topics.items()],
        )

        def check(resp: Any) -> None:
            for t in resp.topics:
                for p in t.partitions:
                    if p.error_code:
                        raise error_for(
                            p.error_code, None, f"commit of {t.name}-{p.partition_index} for group {group!r}"
                        )

        return self._coordinator(group).chain(lambda node: self.net.request(node, req)).chain(check)

    def delete_group_offsets(self, group: str, partitions: list[TopicPartition]) -> Pending[None]:
        """Deletes the committed offsets of `partitions` for `group` (OffsetDelete, at its
        coordinator), as Kafka's deleteConsumerGroupOffsets: refused for the whole group
        (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP) or per partition (GROUP_SUBSCRIBED_TO_TOPIC while
        the group's members subscribe to the topic, UNKNOWN_TOPIC_OR_PARTITION)."""
        cls = _OffsetDeleteRequest
        topics: dict[str, list[Any]] = {}
        for tp in sorted(set(partitions)):
            topics.setdefault(tp.topic, []).append(cls.OffsetDeleteRequestPartition(partition_index=tp.partition))
        req = cls(
            group_id=group, topics=[cls.OffsetDeleteRequestTopic(name=t, partitions=ps) for t, ps in topics.items()]
        )

        def check(resp: Any) -> None:
            if resp.error_code:
                raise error_for(resp.error_code, None, f"delete offsets of group {group!r}")
            for t in resp.topics:
                for p in t.partitions:
                    if p.error_code:
                        raise error_for(
                            p.error_code, None, f"delete offset of {t.name}-{p.partition_index} for group {group!r}"
                        )

        return self._coordinator(group).chain(lambda node: self.net.request(node, req)).chain(check)

    def describe_log_dirs(self, broker: int) -> Pending[dict[TopicPartition, int]]:
        """The size in bytes of every replica `broker` holds (DescribeLogDirs, all topics)."""

        def parse(resp: Any) -> dict[TopicPartition, int]:
            if getattr(resp, "error_code", 0):
                raise error_for(resp.error_code, None, f"log dirs of broker {broker}")
            out = {}
            for r in resp.results:
                if r.error_code:
                    raise error_for(r.error_code, None, f"log dir {r.log_dir} of broker {broker}")
                for t in r.topics:
                    for p in t.partitions:
                        if not p.is_future_key:
                            out[TopicPartition(t.name, p.partition_index)] = p.partition_size
            return out

        return self._to_broker(broker, _DescribeLogDirsRequest(topics=None)).chain(parse)

    def describe_replica_log_dirs(self, broker: int) -> Pending[dict[TopicPartition, tuple[str, str | None]]]:
        """Where each replica on `broker` is: {partition: (log directory, the log directory it
        is being moved to, or None)} (DescribeLogDirs, all topics)."""

        def parse(resp: Any) -> dict[TopicPartition, tuple[str, str | None]]:
            if getattr(resp, "error_code", 0):
                raise error_for(resp.error_code, None, f"log dirs of broker {broker}")
            current: dict[TopicPartition, str] = {}
            future: dict[TopicPartition, str] = {}
            for r in resp.results:
                if r.error_code:
                    raise error_for(r.error_code, None, f"log dir {r.log_dir} of broker {broker}")
                for t in r.topics:
                    for p in t.partitions:
                        (future if p.is_future_key else current)[TopicPartition(t.name, p.partition_index)] = r.log_dir
            return {tp: (d, future.get(tp)) for tp, d in current.items()}

        return self._to_broker(broker, _DescribeLogDirsRequest(topics=None)).chain(parse)

    def alter_replica_log_dirs(self, broker: int, moves: dict[TopicPartition, str]) -> Pending[None]:
        """Move replicas on `broker` to other log directories of it, online (AlterReplicaLogDirs,
        KIP-113); `describe_replica_log_dirs` shows when they have arrived. The first
        partition refused raises (LogDirNotFoundError, ReplicaNotAvailableError, ...)."""
        cls = _AlterReplicaLogDirsRequest
        by_dir: dict[str, dict[str, list[int]]] = {}
        for tp, path in moves.items():
            by_dir.setdefault(path, {}).setdefault(tp.topic, []).append(tp.partition)
        req = cls(
            dirs=[
                cls.AlterReplicaLogDir(
                    path=path, topics=[cls.AlterReplicaLogDirTopic(name=t, partitions=ps) for t, ps in topics.items()]
                )
                for path, topics in by_dir.items()
            ]
        )

        def check(resp: Any) -> None:
            for t in resp.results:
                for p in t.partitions:
                    if p.error_code:
                        raise error_for(
                            p.error_code,
                            None,
                            f"moving {t.topic_name}-{p.partition_index} on broker "
                            f"{broker} to {moves[TopicPartition(t.topic_name, p.partition_index)]}",
                        )

        return self._to_broker(broker, req).chain(check)

    def describe_user_scram_credentials(self, users: list[str] | None) -> Pending[dict[str, list[tuple[str, int]]]]:
        """{user: [(mechanism, iterations)]} of `users` (None: every user with a credential);
        a named user without one raises ResourceNotFoundError. Salts and keys never leave
        the broker."""
        cls = _DescribeUserScramCredentialsRequest
        req = cls(users=None if users is None else [cls.UserName(name=u) for u in users])

        def parse(resp: Any) -> dict[str, list[tuple[str, int]]]:
            if resp.error_code:
                raise error_for(resp.error_code, resp.error_message, "describe SCRAM credentials")
            out = {}
            for r in resp.results:
                if r.error_code:
                    raise error_for(r.error_code, r.error_message, f"describe SCRAM credentials of user {r.user!r}")
                out[r.user] = [
                    (scram.MECHANISM_NAMES.get(c.mechanism, f"type {c.mechanism}"), c.iterations)
                    for c in r.credential_infos
                ]
            return out

        return self.net.request(self.net.any_node(), req).chain(parse)

    def alter_user_scram_credentials(
        self, upsertions: list[tuple[str, str, str | bytes, int]], deletions: list[tuple[str, str]]
    ) -> Pending[None]:
        """Sets (user, mechanism, password, iterations) and deletes (user, mechanism)
        credentials in one AlterUserScramCredentials. As Kafka's Admin, the salt is random
        and the password is salted here, so only the salted password travels. A mechanism
        other than SCRAM-SHA-256/512, or iterations outside [4096, 16384], raise before
        anything is sent; a user the broker refuses raises its error (naming the user)."""
        cls = _AlterUserScramCredentialsRequest
        for user, mechanism in [*((u, m) for u, m, _p, _i in upsertions), *deletions]:
            if mechanism not in scram.MECHANISM_TYPES:
                raise error_for(
                    ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                    f"unknown SCRAM mechanism {mechanism!r} (SCRAM-SHA-256 or SCRAM-SHA-512)",
                    f"alter SCRAM credentials of user {user!r}",
                )
        ups = []
        for user, mechanism, password, iterations in upsertions:
            if not scram.MIN_ITERATIONS <= iterations <= scram.MAX_ITERATIONS:
                raise error_for(
                    ErrorCode.UNACCEPTABLE_CREDENTIAL,
                    f"{iterations} iterations, must be between {scram.MIN_ITERATIONS} and {scram.MAX_ITERATIONS}",
                    f"alter SCRAM credentials of user {user!r} ({mechanism})",
                )
            salt = secrets.token_bytes(SCRAM_SALT_BYTES)
            secret = password.encode() if isinstance(password, str) else bytes(password)
            ups.append(
                cls.ScramCredentialUpsertion(
                    name=user,
                    mechanism=scram.MECHANISM_TYPES[mechanism],
                    iterations=iterations,
                    salt=salt,
                    salted_password=scram.salted_password(mechanism, secret, salt, iterations),
                )
            )
        req = cls(
            deletions=[cls.ScramCredentialDeletion(name=u, mechanism=scram.MECHANISM_TYPES[m]) for u, m in deletions],
            upsertions=ups,
        )

        def check(resp: Any) -> None:
            for r in resp.results:
                if r.error_code:
                    raise error_for(r.error_code, r.error_message, f"alter SCRAM credentials of user {r.user!r}")

        return self.net.request(self.net.any_node(), req).chain(check)

    def create_acls(self, acls: list[AclBinding]) -> Pending[None]:
        """Creates `acls` (one CreateAcls, to any broker: it forwards to the controller). An
        ACL that exists already is left as it is; a refused one raises its error (most often
        InvalidRequestError, naming the field), after the others were created."""
        cls = _CreateAclsRequest
        creations = []
        for a in acls:
            rt, pt, op, perm = _acl_codes(a)
            creations.append(
                cls.AclCreation(
                    resource_type=rt,
                    resource_name=a.name,
                    resource_pattern_type=pt,
                    principal=a.principal,
                    host=a.host,
                    operation=op,
                    permission_type=perm,
                )
            )

        def check(resp: Any) -> None:
            for a, r in zip(acls, resp.results):
                if r.error_code:
                    raise error_for(r.error_code, r.error_message, f"create ACL {a}")

        return self.net.request(self.net.any_node(), cls(creations=creations)).chain(check)

    def describe_acls(self, f: AclBindingFilter) -> Pending[list[AclBinding]]:
        """The ACLs `f` matches, from any broker's metadata image."""
        rt, pt, op, perm = _acl_codes(f)
        req = _DescribeAclsRequest(
            resource_type_filter=rt,
            resource_name_filter=f.name,
            pattern_type_filter=pt,
            principal_filter=f.principal,
            host_filter=f.host,
            operation=op,
            permission_type=perm,
        )

        def parse(resp: Any) -> list[AclBinding]:
            if resp.error_code:
                raise error_for(resp.error_code, resp.error_message, "describe ACLs")
            return [
                _binding(
                    r.resource_type,
                    r.resource_name,
                    r.pattern_type,
                    a.principal,
                    a.host,
                    a.operation,
                    a.permission_type,
                )
                for r in resp.resources
                for a in r.acls
            ]

        return self.net.request(self.net.any_node(), req).chain(parse)

    def delete_acls(self, filters: list[AclBindingFilter]) -> Pending[list[list[AclBinding]]]:
        """Deletes the ACLs each filter matches (one DeleteAcls); returns the ACLs deleted,
        per filter (an ACL two filters match is in both lists)."""
        cls = _DeleteAclsRequest
        fs = []
        for f in filters:
            rt, pt, op, perm = _acl_codes(f)
            fs.append(
                cls.DeleteAclsFilter(
                    resource_type_filter=rt,
                    resource_name_filter=f.name,
                    pattern_type_filter=pt,
                    principal_filter=f.principal,
                    host_filter=f.host,
                    operation=op,
                    permission_type=perm,
                )
            )

        def parse(resp: Any) -> list[list[AclBinding]]:
            out = []
            for f, r in zip(filters, resp.filter_results):
                if r.error_code:
                    raise error_for(r.error_code, r.error_message, f"delete ACLs matching {f}")
                out.append(
                    [
                        _binding(
                            m.resource_type,
                            m.resource_name,
                            m.pattern_type,
                            m.principal,
                            m.host,
                            m.operation,
                            m.permission_type,
                        )
                        for m in r.matching_acls
                    ]
                )
            return out

        return self.net.request(self.net.any_node(), cls(filters=fs)).chain(parse)

    def describe_client_quotas(
        self, components: list[tuple[str, str, str | None]], strict: bool
    ) -> Pending[dict[tuple[tuple[str, str | None], ...], dict[str, float]]]:
        """{entity: {key: value}} of the client quotas the filter matches, from any broker's
        metadata image. An entity is a sorted tuple of (type, name) pairs, None the default.
        `components`: (entity type, "exact" | "default" | "any", name for "exact")."""
        cls = _DescribeClientQuotasRequest
        comps = []
        for entity_type, match, name in components:
            if match not in QUOTA_MATCH_TYPES:
                raise ValueError(
                    f"client quota filter on {entity_type!r}: match {match!r} is not one of {sorted(QUOTA_MATCH_TYPES)}"
                )
            comps.append(
                cls.ComponentData(
                    entity_type=entity_type,
                    match_type=QUOTA_MATCH_TYPES[match],
                    match=name if match == "exact" else None,
                )
            )

        def parse(resp: Any) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
            if resp.error_code:
                raise error_for(resp.error_code, resp.error_message, "describe client quotas")
            return {
                tuple(sorted((e.entity_type, e.entity_name) for e in entry.entity)): {
                    v.key: v.value for v in entry.values
                }
                for entry in resp.entries or []
            }

        return self.net.request(self.net.any_node(), cls(components=comps, strict=strict)).chain(parse)

    def alter_client_quotas(
        self, alterations: list[tuple[dict[str, str | None], dict[str, float | None]]], validate_only: bool
    ) -> Pending[None]:
        """Sets (a value) or removes (None) client quota keys of entities ({type: name, None
        the default}) in one AlterClientQuotas; the first refused entity raises its error
        (naming it), after the others were applied."""
        cls = _AlterClientQuotasRequest
        req = cls(
            validate_only=validate_only,
            entries=[
                cls.EntryData(
                    entity=[cls.EntityData(entity_type=t, entity_name=n) for t, n in entity.items()],
                    ops=[
                        cls.OpData(key=k, value=0.0 if v is None else float(v), remove=v is None)
                        for k, v in ops.items()
                    ],
                )
                for entity, ops in alterations
            ],
        )

        def check(resp: Any) -> None:
            for r in resp.entries:
                if r.error_code:
                    what = ", ".join(
                        f"{e.entity_type}={'<default>' if e.entity_name is None else e.entity_name}" for e in r.entity
                    )
                    raise error_for(r.error_code, r.error_message, f"alter client quotas of {what}")

        return self.net.request(self.net.any_node(), req).chain(check)
