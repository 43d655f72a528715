"""The metadata image: what the cluster knows about brokers, topics and partitions, group
configs, users' SCRAM credentials, ACLs, client quotas and the segments of partitions in
remote storage (tiered storage, KIP-405).

The controller is the only writer; brokers read the current image. Every partition
carries the fields the replicated wave needs (leader, leader epoch, replicas, ISR,
partition epoch) even though a single-node cluster always has itself as leader and ISR.

The image lives in memory only: every node builds it by applying the metadata log
(metadata_records.py, metadata_quorum.py); snapshots of the log hold it in the JSON shape
below (`to_json`).

On disk (owned by `MetadataStore`):
    <log.dirs>/meta.properties            Kafka-style: version=1, cluster.id, node.id
    <log.dirs>/__cluster_metadata/image.json   (only in data directories of single nodes
                                          from before the metadata log: migrated at start)
        {"version": 1, "cluster_id": str, "next_producer_id": int,
         "topics": [{"name", "topic_id" (uuid hex), "configs": {k: v},
                     "partitions": [{"partition", "leader", "leader_epoch", "replicas",
                                     "isr", "partition_epoch", "adding_replicas",
                                     "removing_replicas"}]}],
         "group_configs": {group: {k: v}},
         "client_metrics": {subscription: {k: v}},
         "scram_credentials": {user: {mechanism: {"salt", "stored_key", "server_key" (base64),
                                                  "iterations"}}},
         "acls": {id (uuid hex): {"resource_type", "resource_name", "pattern_type", "principal",
                                  "host", "operation", "permission_type"}},
         "client_quotas": [{"entity": [[type, name or null], ...], "quotas": {key: value}}]}
    Snapshots of the metadata log (`to_json`) also hold "broker_configs", "features",
    "voters", "delegation_tokens", ... and "remote_segments": [{"topic_id" (uuid hex),
    "partition", "segments": [RemoteLogSegment.to_json(), ...]}], by topic id and partition.
    A single node of an earlier version wrote it whole after every change. At start such a
    node writes the image's records to its metadata log (`diff_records` from an empty
    image) and then removes the file (a crash in between: the topic ids already in the log
    show the migration happened, and the file is removed).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import uuid
from pathlib import Path

from logbroker.common import directory_id as directory_ids
from logbroker.common.files import fsync_dir
from logbroker.common.sasl_scram import ScramCredential
from logbroker.coord.metadata import client_quotas

TOPIC_NAME_RE = re.compile(r"^[a-zA-Z0-9._-]+$")
TOPIC_NAME_MAX = 249


def topic_name_error(name: str | None) -> str | None:
    """Why `name` is not a legal Kafka topic name, or None if it is."""
    if not name:
        return "topic name is empty"
    if name in (".", ".."):
        return f"topic name {name!r} is not allowed"
    if len(name) > TOPIC_NAME_MAX:
        return f"topic name is {len(name)} characters, the limit is {TOPIC_NAME_MAX}"
    if not TOPIC_NAME_RE.match(name):
        return f"topic name {name!r} has characters outside [a-zA-Z0-9._-]"
    return None


@dataclasses.dataclass
class PartitionState:
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    partition_epoch: int = 0
    # A reassignment in progress (KIP-455): `replicas` is the target replicas followed by the
    # ones being removed; `adding_replicas` are targets not yet caught up, `removing_replicas`
    # leave when every adding replica has joined the ISR. Both empty otherwise.
    adding_replicas: list[int] = dataclasses.field(default_factory=list)
    removing_replicas: list[int] = dataclasses.field(default_factory=list)
    # Eligible leader replicas (KIP-966, eligible_leaders.py): replicas out of the ISR that
    # hold every record below the HW, electable when the ISR is empty; and the last known
    # leader, kept while the partition has none.
    elr: list[int] = dataclasses.field(default_factory=list)
    last_known_elr: list[int] = dataclasses.field(default_factory=list)

    @property
    def target_replicas(self) -> list[int]:
        """The replicas the partition ends up with (its replicas when nothing is moving)."""
        return [r for r in self.replicas if r not in self.removing_replicas]

    @property
    def preferred_leader(self) -> int:
        """The first target replica: the leader a balanced cluster gives the partition."""
        return self.target_replicas[0]


@dataclasses.dataclass
class TopicState:
    name: str
    topic_id: uuid.UUID
    partitions: dict[int, PartitionState]
    configs: dict[str, str]


@dataclasses.dataclass
class BrokerRegistration:
    node_id: int
    host: str
    port: int
    rack: str | None = None
    epoch: int = 0  # bumped by each registration; fences stale heartbeats
    fenced: bool = False
    # Every client listener's advertised [host, port] by listener name; host/port above are
    # the inter-broker listener's. Empty for a broker with one listener (or an old record).
    endpoints: dict[str, list] = dataclasses.field(default_factory=dict)

    def endpoint(self, listener: str) -> tuple[str, int]:
        """Where clients of `listener` reach this broker (the inter-broker address when the
        broker has no such listener)."""
        e = self.endpoints.get(listener)
        return (self.host, self.port) if e is None else (e[0], int(e[1]))


# Kafka's codes (common/acl.py has them all as enums; the image needs these few)
ACL_ANY = 1  # resource type, pattern type, operation and permission type filters: anything
PATTERN_MATCH, PATTERN_LITERAL, PATTERN_PREFIXED = 2, 3, 4
PERMISSION_DENY, PERMISSION_ALLOW = 2, 3
ACL_WILDCARD = "*"  # a LITERAL ACL named "*" is on every resource of its type


@dataclasses.dataclass(frozen=True)
class AclBinding:
    """One ACL, as Kafka's StandardAcl (and its AccessControlEntryRecord): a resource pattern
    (type, name, LITERAL or PREFIXED) and an entry (principal `Type:name`, host or "*",
    operation, DENY or ALLOW), with Kafka's codes (broker/authorizer.py)."""

    resource_type: int
    resource_name: str
    pattern_type: int  # PATTERN_LITERAL or PATTERN_PREFIXED
    principal: str
    host: str
    operation: int
    permission_type: int  # PERMISSION_DENY or PERMISSION_ALLOW

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, doc: dict) -> AclBinding:
        """The inverse of `to_json`; KeyError for a missing field, ValueError for a bad value
        (a field of the wrong type, a pattern type other than LITERAL/PREFIXED, a permission
        other than DENY/ALLOW, an empty resource name)."""
        acl = cls(
            doc["resource_type"],
            doc["resource_name"],
            doc["pattern_type"],
            doc["principal"],
            doc["host"],
            doc["operation"],
            doc["permission_type"],
        )
        for f in dataclasses.fields(cls):
            value, kind = getattr(acl, f.name), (str if f.type == "str" else int)
            if not isinstance(value, kind) or isinstance(value, bool):
                raise ValueError(f"{f.name} {value!r} is not {'a string' if kind is str else 'an integer'}")
        if acl.pattern_type not in (PATTERN_LITERAL, PATTERN_PREFIXED):
            raise ValueError(f"pattern type {acl.pattern_type} is not LITERAL (3) or PREFIXED (4)")
        if acl.permission_type not in (PERMISSION_DENY, PERMISSION_ALLOW):
            raise ValueError(f"permission type {acl.permission_type} is not DENY (2) or ALLOW (3)")
        if not acl.resource_name:
            raise ValueError("the resource name is empty")
        return acl


@dataclasses.dataclass(frozen=True)
class AclBindingFilter:
    """Which ACLs DescribeAcls shows and DeleteAcls removes: Kafka's AclBindingFilter. ANY
    (resource type, operation, permission type) and None (name, principal, host) match
    anything; a pattern type of LITERAL or PREFIXED matches ACLs of that type with an equal
    name, ANY those of every type with an equal name, and MATCH the ACLs that apply to the
    named resource: LITERAL with its name or "*", PREFIXED with a prefix of it."""

    resource_type: int = ACL_ANY
    resource_name: str | None = None
    pattern_type: int = ACL_ANY
    principal: str | None = None
    host: str | None = None
    operation: int = ACL_ANY
    permission_type: int = ACL_ANY

    def matches(self, acl: AclBinding) -> bool:
        return self._matches_pattern(acl) and (
            (self.principal is None or self.principal == acl.principal)
            and (self.host is None or self.host == acl.host)
            and self.operation in (ACL_ANY, acl.operation)
            and self.permission_type in (ACL_ANY, acl.permission_type)
        )

    def _matches_pattern(self, acl: AclBinding) -> bool:
        if self.resource_type not in (ACL_ANY, acl.resource_type):
            return False
        if self.pattern_type not in (ACL_ANY, PATTERN_MATCH, acl.pattern_type):
            return False
        if self.resource_name is None:
            return True
        if self.pattern_type in (ACL_ANY, acl.pattern_type):
            return self.resource_name == acl.resource_name
        # MATCH: the ACLs that apply to the resource named
        if acl.pattern_type == PATTERN_LITERAL:
            return acl.resource_name in (self.resource_name, ACL_WILDCARD)
        return acl.pattern_type == PATTERN_PREFIXED and self.resource_name.startswith(acl.resource_name)


@dataclasses.dataclass(frozen=True)
class DelegationToken:
    """A delegation token (KIP-48; Kafka's DelegationTokenRecord), never its HMAC: any node
    derives that from `delegation.token.secret.key` and the token id
    (common/delegation_tokens.py). Principals are "User:<name>"; times in epoch ms."""

    token_id: str
    owner: str
    requester: str
    renewers: tuple[str, ...]
    issue_ms: int
    max_ms: int
    expiry_ms: int

    def to_json(self) -> dict:
        return {
            "token_id": self.token_id,
            "owner": self.owner,
            "requester": self.requester,
            "renewers": list(self.renewers),
            "issue_ms": self.issue_ms,
            "max_ms": self.max_ms,
            "expiry_ms": self.expiry_ms,
        }

    @classmethod
    def from_json(cls, doc: dict) -> DelegationToken:
        """The inverse of `to_json`; KeyError or ValueError for a missing or bad field."""
        token = cls(
            str(doc["token_id"]),
            str(doc["owner"]),
            str(doc["requester"]),
            tuple(str(r) for r in doc["renewers"]),
            int(doc["issue_ms"]),
            int(doc["max_ms"]),
            int(doc["expiry_ms"]),
        )
        if not token.token_id or not token.owner.startswith("User:"):
            raise ValueError(f"token {token.token_id!r}: an id and an owner User:<name> are needed")
        return token


REMOTE_SEGMENT_STATES = (
    "COPY_SEGMENT_STARTED",
    "COPY_SEGMENT_FINISHED",
    "DELETE_SEGMENT_STARTED",
    "DELETE_SEGMENT_FINISHED",
)


@dataclasses.dataclass(frozen=True)
class RemoteLogSegment:
    """One segment of a partition in remote storage (tiered storage; Kafka's
    RemoteLogSegmentMetadata, kept in the metadata log instead of __remote_log_metadata).

    `state` is one of REMOTE_SEGMENT_STATES but DELETE_SEGMENT_FINISHED (a segment whose
    deletion finished is gone from the image); `leader_epoch`, `broker_id` and `event_ms`
    are those of the record that set it (the leader that wrote it, in its leader epoch).
    The offsets, inclusive at both ends, the newest timestamp, the size and the leader
    epochs the segment covers (`segment_epochs`: (epoch, first offset) pairs, ascending)
    are fixed when the copy starts. Frozen: images share segments."""

    segment_id: uuid.UUID
    start_offset: int
    end_offset: int
    state: str
    leader_epoch: int
    broker_id: int
    event_ms: int
    max_timestamp: int
    size_bytes: int
    segment_epochs: tuple[tuple[int, int], ...]
    # the segment file's base offset (its objects' names, its index's offsets): the start
    # offset, or below it when the copy took over from an earlier one part way into the file
    base_offset: int = -1

    def __post_init__(self) -> None:
        if self.base_offset < 0:
            object.__setattr__(self, "base_offset", self.start_offset)

    def to_json(self) -> dict:
        return {
            "segment_id": self.segment_id.hex,
            "start_offset": self.start_offset,
            "end_offset": self.end_offset,
            "state": self.state,
            "leader_epoch": self.leader_epoch,
            "broker_id": self.broker_id,
            "event_ms": self.event_ms,
            "max_timestamp": self.max_timestamp,
            "size_bytes": self.size_bytes,
            "segment_epochs": [list(e) for e in self.segment_epochs],
            "base_offset": self.base_offset,
        }

    @classmethod
    def from_json(cls, doc: dict) -> RemoteLogSegment:
        """The inverse of `to_json`; KeyError, TypeError or ValueError for a missing or bad
        field (fields are checked by metadata_records.py, which makes them)."""
        return cls(
            uuid.UUID(hex=doc["segment_id"]),
            int(doc["start_offset"]),
            int(doc["end_offset"]),
            str(doc["state"]),
            int(doc["leader_epoch"]),
            int(doc["broker_id"]),
            int(doc["event_ms"]),
            int(doc["max_timestamp"]),
            int(doc["size_bytes"]),
            tuple((int(e), int(o)) for e, o in doc["segment_epochs"]),
            int(doc.get("base_offset", doc["start_offset"])),
        )


def remote_segment_order(segment: RemoteLogSegment) -> tuple[int, uuid.UUID]:
    """The order of a partition's remote segments in the image: start offset, then id."""
    return segment.start_offset, segment.segment_id


@dataclasses.dataclass
class MetadataImage:
    cluster_id: str
    controller_id: int
    brokers: dict[int, BrokerRegistration]
    topics: dict[str, TopicState]
    next_producer_id: int = 0
    group_configs: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)  # group id -> overrides
    # user name -> mechanism -> credential (a user with no credential left has no entry)
    scram_credentials: dict[str, dict[str, ScramCredential]] = dataclasses.field(default_factory=dict)
    # ACL id (uuid hex, as Kafka's AccessControlEntryRecord) -> ACL
    acls: dict[str, AclBinding] = dataclasses.field(default_factory=dict)
    # client quota entity (coord/metadata/client_quotas.py QuotaEntity) -> {key: value}
    client_quotas: dict[tuple, dict[str, float]] = dataclasses.field(default_factory=dict)
    # topic id -> name: the index of `topics` by id, kept by MetadataDelta (built here when
    # an image is made from its topics alone)
    topic_ids: dict[uuid.UUID, str] = dataclasses.field(default_factory=dict)
    # finalized feature levels (feature_control.py; a feature at level 0 has no entry) and the
    # metadata-log index of their last change (ApiVersions' FinalizedFeaturesEpoch)
    features: dict[str, int] = dataclasses.field(default_factory=dict)
    features_epoch: int = 0
    # dynamic broker configs: "" (the cluster default) or a broker id -> {key: value}
    broker_configs: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)
    # controller-only nodes (process.roles=controller) -> [host, port] of their controller
    # listener: voters that are not brokers and never will be
    controllers: dict[int, list] = dataclasses.field(default_factory=dict)
    # the controller quorum's voters -> [host, port, directory id (base64 uuid)]: where each
    # voter's controller listener is (Kafka's VotersRecord). Who votes is the Raft
    # configuration; this is the directory every node dials them by.
    voters: dict[int, list] = dataclasses.field(default_factory=dict)
    # client-metrics subscriptions (KIP-714, CLIENT_METRICS config resources): name -> {key: value}
    client_metrics: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)
    # delegation tokens (KIP-48): token id -> token, until the controller removes it once expired
    delegation_tokens: dict[str, DelegationToken] = dataclasses.field(default_factory=dict)
    # tiered storage: (topic id, partition) -> its segments in remote storage, sorted by
    # (start_offset, segment_id); a partition with none has no entry. Tuples: a delta
    # replaces one partition's whole (metadata_delta.py), never changes one in place.
    remote_segments: dict[tuple[uuid.UUID, int], tuple[RemoteLogSegment, ...]] = dataclasses.field(default_factory=dict)
    # tiered storage: (topic id, partition) -> the first offset a consumer may read, where
    # DeleteRecords raised it into the remote segments (RemoteLogStartOffset records);
    # no entry: the first remote segment's start
    remote_log_start: dict[tuple[uuid.UUID, int], int] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.topics and not self.topic_ids:
            self.topic_ids = {t.topic_id: name for name, t in self.topics.items()}

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicState | None:
        name = self.topic_ids.get(topic_id)
        t = None if name is None else self.topics.get(name)
        if t is not None and t.topic_id == topic_id:
            return t
        # an image changed outside a delta (the controller's scratch copies) may lack the index
        return next((t for t in self.topics.values() if t.topic_id == topic_id), None)

    def remote_segments_of(self, topic_id: uuid.UUID, partition: int) -> tuple[RemoteLogSegment, ...]:
        """The segments of a partition in remote storage, by (start_offset, segment_id);
        empty when it has none (or does not exist)."""
        return self.remote_segments.get((topic_id, partition), ())

    def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        """`user`'s credential for `mechanism` ("SCRAM-SHA-256" or "SCRAM-SHA-512"), or None."""
        return self.scram_credentials.get(user, {}).get(mechanism)

    def to_json(self) -> dict:
        return {
            "version": 1,
            "cluster_id": self.cluster_id,
            "next_producer_id": self.next_producer_id,
            "topics": [
                {
                    "name": t.name,
                    "topic_id": t.topic_id.hex,
                    "configs": dict(sorted(t.configs.items())),
                    "partitions": [dataclasses.asdict(p) for _, p in sorted(t.partitions.items())],
                }
                for _, t in sorted(self.topics.items())
            ],
            "group_configs": {g: dict(sorted(c.items())) for g, c in sorted(self.group_configs.items())},
            "broker_configs": {b: dict(sorted(c.items())) for b, c in sorted(self.broker_configs.items())},
            "client_metrics": {n: dict(sorted(c.items())) for n, c in sorted(self.client_metrics.items())},
            "scram_credentials": {
                u: {m: c.to_json() for m, c in sorted(creds.items())}
                for u, creds in sorted(self.scram_credentials.items())
            },
            "acls": {i: a.to_json() for i, a in sorted(self.acls.items())},
            "client_quotas": client_quotas.to_json(self.client_quotas),
            "features": dict(sorted(self.features.items())),
            "controllers": {str(n): list(e) for n, e in sorted(self.controllers.items())},
            "voters": {str(n): list(e) for n, e in sorted(self.voters.items())},
            "features_epoch": self.features_epoch,
            "delegation_tokens": {i: t.to_json() for i, t in sorted(self.delegation_tokens.items())},
            "remote_segments": [
                {"topic_id": tid.hex, "partition": p, "segments": [s.to_json() for s in segments]}
                for (tid, p), segments in sorted(self.remote_segments.items(), key=lambda kv: (kv[0][0].hex, kv[0][1]))
            ],
            "remote_log_start": [
                {"topic_id": tid.hex, "partition": p, "offset": o}
                for (tid, p), o in sorted(self.remote_log_start.items(), key=lambda kv: (kv[0][0].hex, kv[0][1]))
            ],
        }

    @classmethod
    def from_json(cls, doc: dict, controller_id: int, brokers: dict[int, BrokerRegistration]) -> MetadataImage:
        topics = {}
        for t in doc.get("topics", []):
            parts = {p["partition"]: PartitionState(**p) for p in t["partitions"]}
            topics[t["name"]] = TopicState(t["name"], uuid.UUID(hex=t["topic_id"]), parts, dict(t.get("configs", {})))
        groups = {g: dict(c) for g, c in doc.get("group_configs", {}).items()}
        scram = {
            u: {m: ScramCredential.from_json(m, c) for m, c in creds.items()}
            for u, creds in doc.get("scram_credentials", {}).items()
        }
        acls = {i: AclBinding.from_json(a) for i, a in doc.get("acls", {}).items()}
        quotas = client_quotas.from_json(doc.get("client_quotas", []))
        features = {str(k): int(v) for k, v in doc.get("features", {}).items()}
        broker_configs = {str(b): dict(c) for b, c in doc.get("broker_configs", {}).items()}
        controllers = {int(n): list(e) for n, e in doc.get("controllers", {}).items()}
        voters = {int(n): list(e) for n, e in doc.get("voters", {}).items()}
        client_metrics = {str(n): dict(c) for n, c in doc.get("client_metrics", {}).items()}
        tokens = {str(i): DelegationToken.from_json(t) for i, t in doc.get("delegation_tokens", {}).items()}
        remote_segments = {
            (uuid.UUID(hex=r["topic_id"]), int(r["partition"])): tuple(
                sorted((RemoteLogSegment.from_json(s) for s in r["segments"]), key=remote_segment_order)
            )
            for r in doc.get("remote_segments", [])
            if r["segments"]
        }
        remote_log_start = {
            (uuid.UUID(hex=r["topic_id"]), int(r["partition"])): int(r["offset"])
            for r in doc.get("remote_log_start", [])
        }
        return cls(
            doc["cluster_id"],
            controller_id,
            brokers,
            topics,
            int(doc.get("next_producer_id", 0)),
            groups,
            scram,
            acls,
            quotas,
            features=features,
            features_epoch=int(doc.get("features_epoch", 0)),
            broker_configs=broker_configs,
            controllers=controllers,
            voters=voters,
            client_metrics=client_metrics,
            delegation_tokens=tokens,
            remote_segments=remote_segments,
            remote_log_start=remote_log_start,
        )


class MetadataStore:
    """A node's identity on disk (`meta.properties`), and the image file single nodes kept
    before every node ran on the metadata log (read once, to migrate it; see module doc)."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.legacy_path = data_dir / "__cluster_metadata" / "image.json"

    def read_legacy_image(self) -> dict | None:
        """The pre-metadata-log image.json of a single node, or None when there is none."""
        try:
            text = self.legacy_path.read_text()
        except FileNotFoundError:
            return None
        try:
            return json.loads(text)
        except json.JSONDecodeError as e:
            raise RuntimeError(f"metadata image {self.legacy_path} is not valid JSON: {e}") from None

    def remove_legacy_image(self) -> None:
        """Once its records are committed to the metadata log, image.json and its directory go."""
        for name in ("image.json", "image.json.tmp"):
            (self.legacy_path.parent / name).unlink(missing_ok=True)
        try:
            self.legacy_path.parent.rmdir()
        except OSError:
            pass  # something else in it: left for the operator
        fsync_dir(self.data_dir)

    def read_meta_properties(self) -> dict[str, str]:
        path = self.data_dir / "meta.properties"
        try:
            text = path.read_text()
        except FileNotFoundError:
            return {}
        out = {}
        for line in text.splitlines():
            if line.strip() and not line.startswith("#") and "=" in line:
                k, v = line.split("=", 1)
                out[k.strip()] = v.strip()
        return out

    def write_meta_properties(self, cluster_id: str, node_id: int, directory_id: str | None = None) -> None:
        """Kafka's meta.properties (version 1): cluster.id, node.id and directory.id, the
        directory's own id (a new random one unless given; KIP-858, KIP-853: a controller
        is added to the quorum by node id and this id, which `kafka-metadata-quorum
        add-controller` reads from here)."""
        path = self.data_dir / "meta.properties"
        tmp = path.with_suffix(".tmp")
        directory_id = directory_id or directory_ids.new()
        tmp.write_text(
            f"#logbroker\nversion=1\ncluster.id={cluster_id}\nnode.id={node_id}\ndirectory.id={directory_id}\n"
        )
        os.replace(tmp, path)
